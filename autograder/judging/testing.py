"""One test cell, run here against the student's functions in the kernel.

Test cells never enter the kernel. While one runs here (autograder/judging/referee.py),
the kernel runs the agent's `serve` cell, which answers the test's calls; the test passes
when it runs to its end here. What the student's code prints or displays meanwhile is
kept in the test's output, and never read as a verdict or a score. A function's
diagnosis probes (autograder/judging/diagnosis.py) run the same way, after the cells.
"""

import time
import uuid

import nbformat

from autograder.judging import diagnosis, referee
from autograder.judging.kernel import KernelDied
from autograder.judging.outputs import Outputs, grader_error

TEST_PRINT_LIMIT = 20_000  # characters of what a test cell prints, kept in its output


def run_test(kernel, channel, judge, source, key, timeout, outputs):
    """Run one test cell here, its calls answered by the kernel's agent.

    Returns (verdict, message, outputs to add: what the test printed, its error)."""
    token = uuid.uuid4().hex

    def from_kernel(message):
        """What the student's code printed or displayed while the test ran: shown, never
        held against it nor counted for it. nbgrader reads a test cell's execute_result
        as a score and its stderr as a failure: here they become a display and stdout
        (the score itself comes from the verdict: preprocessor.VerdictGrades)."""
        kind, content = message["msg_type"], message.get("content") or {}
        if kind == "error":
            return  # the test's own message says what failed
        if kind == "stream":
            message = {**message, "content": {**content, "name": "stdout"}}
        elif kind == "execute_result":
            message = {**message, "msg_type": "display_data",
                       "content": {"data": content.get("data", {}), "metadata": content.get("metadata", {})}}
        outputs(message)

    run = kernel.start(f"__autograder__.serve({token!r})", from_kernel, silent=True)

    def pump(seconds, fd):
        ready = run.pump(seconds, fd)
        channel.ended = run.reply is not None
        return ready

    channel.pump = pump
    channel.begin(token, time.monotonic() + timeout)
    try:
        passed, ename, evalue, printed = judge.run_test(source, key)
    finally:
        channel.finish()
    _wait_for_end(kernel, run)
    extra = []
    if printed:
        extra.append(nbformat.v4.new_output("stream", name="stdout", text=printed[:TEST_PRINT_LIMIT]))
    if passed:
        return "passed", "", extra
    extra.append(grader_error(ename, evalue))
    return "failed", f"{ename}: {evalue}", extra


def _wait_for_end(kernel, run):
    """The agent's cell ends once told; a kernel that does not end it is interrupted, then stopped."""
    deadline = time.monotonic() + 10
    interrupted = False
    while not run.done():
        if time.monotonic() > deadline:
            if interrupted:
                raise referee.GradingStopped("the kernel did not return from a test and did not stop when "
                                             "interrupted")
            kernel.interrupt()
            interrupted, deadline = True, time.monotonic() + 10
        run.pump(0.2)
    run.finish()


def probe_submission(execution, probes):
    """After the notebook's cells: run the probes of each function that lost points (its
    tests did not all pass) and whose tests did not crash or run out of time, through the
    executor's kernel and referee as a test would. Returns grade_id -> encoded values.
    Never changes a verdict; at most diagnosis.PROBE_SECONDS per function, within the notebook's time."""
    failing = {}
    for key, (section, _) in execution.sections.items():
        if execution.report.verdicts.get(key, "not run") != "passed":
            failing[section] = True
    probed = {}
    for function in [f for f in failing if f in probes and f not in execution.dead]:
        if execution.stop or execution.kernel is None:
            break
        left = execution._left()
        if left <= 1:
            break
        judge = execution.judge
        namespace = judge.namespace
        judge.namespace = dict(namespace)  # the probes' names stay out of the tests' namespace
        began = time.monotonic()
        try:
            verdict, _, _ = run_test(execution.kernel, execution.channel, judge, probes[function].source(),
                                     f"probes-{function}", min(diagnosis.PROBE_SECONDS, left),
                                     Outputs({"left": 0}, 0))
            if verdict == "passed":
                probed[function] = diagnosis.encode_probed(judge.namespace.get(diagnosis.VALUES))
        except (KernelDied, referee.GradingStopped):
            execution._close()  # a function that takes the kernel down is not probed further
            break
        finally:
            judge.namespace = namespace
            execution.usage["probe_seconds"] = execution.usage.get("probe_seconds", 0.0) + \
                time.monotonic() - began
    return probed
