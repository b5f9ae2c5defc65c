"""A bounded child (autograder/isolation/bounded.py) computes with PyTorch after its parent
used PyTorch's thread pool: a fork copies no thread, and an OpenMP parallel region in the
child would wait forever for the pool's threads."""

import torch

from autograder.isolation import bounded


def work_in_the_child():
    """Operations large enough to be split across threads, as a probe's setup does."""
    square = torch.ones(600, 600)
    return float((square @ square).tril().sum() + torch.ones(5, 5).tril().sum())


def test_a_child_computes_after_its_parent_used_the_thread_pool():
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))
    try:
        work_in_the_child()  # the pool's threads now exist in this process
        limits = bounded.Limits(seconds=30)
        value = bounded.call(work_in_the_child, [], {}, limits, "the child's work")
    finally:
        torch.set_num_threads(threads)
    assert value == work_in_the_child()
    assert torch.get_num_threads() == threads  # the parent keeps its pool
