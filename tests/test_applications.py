"""Chapter 7's applications: short smoke runs (seconds) and the attention-map readers.

The long training runs are the committed experiment scripts and `make bench`; here each
application trains for a few steps on the CPU, and the helpers that read attention
weights out of PyTorch's layers are checked against what the layers compute.
"""

import json
import math
import os
import random

import pytest
import torch
from torch import nn

from course.applications import classification, language_model, question_answering, translation, vision
from course.applications.attention_maps import decoder_cross_attention, encoder_attention
from course.applications.training import Experiment, fit

CPU = torch.device("cpu")


def pre_norm_encoder(d_model=16, n_heads=4, n_layers=2):
    layer = nn.TransformerEncoderLayer(d_model, n_heads, 32, dropout=0.0, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False).eval()


def test_encoder_attention_gives_the_weights_each_layer_uses():
    """Rows sum to one, and weights @ values through out_proj is the layer's attention output."""
    torch.manual_seed(0)
    encoder = pre_norm_encoder()
    x = torch.randn(3, 5, 16)
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    maps = encoder_attention(encoder, x, key_padding_mask=padding)
    assert [tuple(m.shape) for m in maps] == [(3, 4, 5, 5)] * 2
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 4, 5))
    assert maps[0][1, :, :, 3:].abs().max() == 0, "padded keys get no weight"
    # the first layer's self-attention output, rebuilt from the returned weights
    layer = encoder.layers[0]
    normed = layer.norm1(x)
    w_v = layer.self_attn.in_proj_weight[32:]
    b_v = layer.self_attn.in_proj_bias[32:]
    values = (normed @ w_v.T + b_v).view(3, 5, 4, 4).transpose(1, 2)  # (B, H, n, d_head)
    heads = (maps[0] @ values).transpose(1, 2).reshape(3, 5, 16)
    rebuilt = layer.self_attn.out_proj(heads)
    expected = layer.self_attn(normed, normed, normed, key_padding_mask=padding)[0]
    torch.testing.assert_close(rebuilt, expected, atol=1e-5, rtol=1e-5)


def test_decoder_cross_attention_reads_the_memory_rows_it_weights():
    """A memory whose rows differ only at one position: weights on it explain the change."""
    torch.manual_seed(1)
    layer = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True)
    decoder = nn.TransformerDecoder(layer, 1).eval()
    y, memory = torch.randn(2, 3, 16), torch.randn(2, 6, 16)
    causal = nn.Transformer.generate_square_subsequent_mask(3)
    (maps,) = decoder_cross_attention(decoder, y, memory, tgt_mask=causal)
    assert maps.shape == (2, 4, 3, 6)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 4, 3))
    # rebuild the cross-attention sublayer's output from the returned weights
    layer = decoder.layers[0]
    normed = layer.norm1(y)
    after_self = y + layer.self_attn(normed, normed, normed, attn_mask=causal)[0]
    w_v, b_v = layer.multihead_attn.in_proj_weight[32:], layer.multihead_attn.in_proj_bias[32:]
    values = (memory @ w_v.T + b_v).view(2, 6, 4, 4).transpose(1, 2)  # (B, H, m, d_head)
    rebuilt = layer.multihead_attn.out_proj((maps @ values).transpose(1, 2).reshape(2, 3, 16))
    queries = layer.norm2(after_self)
    expected = layer.multihead_attn(queries, memory, memory)[0]
    torch.testing.assert_close(rebuilt, expected, atol=1e-5, rtol=1e-5)


def test_fit_stops_at_the_time_budget_and_records_every_loss():
    calls = []
    history = fit(lambda i: calls.append(i) or 1.0 / (i + 1), steps=1000, budget_s=0.0, progress=False)
    assert history.steps == 1 and calls == [0] and history.losses == [1.0]
    history = fit(lambda i: float(i), steps=5, progress=False)
    assert history.losses == [0.0, 1.0, 2.0, 3.0, 4.0] and history.seconds >= 0


def test_translation_data_and_a_short_run():
    train, test, source_vocab, target_vocab = translation.make_data(seed=0)
    assert not set(train.numbers.tolist()) & set(test.numbers.tolist())
    assert len(train.numbers) + len(test.numbers) == translation.N_NUMBERS
    assert translation.english_words(21) == ["twenty", "one"]
    assert translation.spanish_words(21) == ["veintiuno"]
    row = (test.numbers == int(test.numbers[0])).nonzero().item()
    assert target_vocab.decode(test.target[row, 1:]) == translation.spanish_words(int(test.numbers[0]))
    result = translation.train(steps=4, batch=16, progress=False, device=CPU, d_model=32, d_ff=32)
    losses = result["history"].losses
    assert len(losses) == 4 and all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]
    assert 0.0 <= result["accuracy"] <= 1.0 and len(result["predictions"]) == len(test.numbers)


def test_vision_short_run_and_class_token_attention():
    train_split, test_split = vision.make_data(seed=0)
    assert train_split.images.shape[1:] == (8, 8) and float(train_split.images.max()) <= 1.0
    assert len(train_split.labels) + len(test_split.labels) == 1797
    result = vision.train(steps=4, batch=32, progress=False, device=CPU, d_model=32, d_ff=32,
                          seed=1, split_seed=0)
    assert torch.equal(result["test"].labels, test_split.labels)
    losses = result["history"].losses
    assert len(losses) == 4 and all(math.isfinite(v) for v in losses)
    model = result["model"].eval()
    maps = model.attention(test_split.images[:3])
    assert [tuple(m.shape) for m in maps] == [(3, 4, 17, 17)] * 2
    torch.testing.assert_close(maps[-1].sum(-1), torch.ones(3, 4, 17))
    # the class token's output alone decides the logits
    tokens = model.tokens(test_split.images[:3])
    with torch.no_grad():
        hidden = model.encoder(tokens)
        torch.testing.assert_close(model.classify(hidden[:, 0]), model(test_split.images[:3]))


def test_language_model_corpus_is_held_out_by_package_without_shared_spans():
    """No package on both sides; no held-out 64-character span seen in training."""
    corpus = language_model.Corpus()
    assert len(corpus.train) > 100_000 and len(corpus.test) > 10_000
    assert corpus.decode(corpus.encode("Return the")) == "Return the"
    texts = language_model.docstrings()
    held = [language_model.package(m) in corpus.held_out for m, _ in texts]
    assert 0 < sum(held) < len(texts) / 5
    assert corpus.train_text == "\n\n".join(t for (_, t), h in zip(texts, held) if not h)
    seen = language_model.spans(corpus.train_text)
    kept = [t for (_, t), h in zip(texts, held) if h and not language_model.spans(t) & seen]
    assert corpus.test_text == "\n\n".join(kept)
    assert corpus.shared_after == 0.0 <= corpus.shared_before
    assert language_model.shared_span_share(corpus.train_text[:500], seen) == 1.0


def test_kneser_ney_is_a_distribution_and_beats_the_bigram():
    """Every context's probabilities sum to one; order 5 beats the add-one bigram."""
    corpus = language_model.Corpus()
    v = len(corpus.characters)
    model = language_model.KneserNey(corpus.train.numpy(), v, order=3)
    for context in ([5, 7], [-1, 3], [90, 91], [-1, -1]):
        contexts = torch.tensor([context] * v).numpy()
        total = model.probabilities(contexts, torch.arange(v).numpy()).sum()
        assert abs(total - 1.0) < 1e-9
    unigram, bigram = language_model.unigram_and_bigram_bits(corpus)
    assert bigram < unigram < math.log2(len(corpus.characters))
    n_grams = language_model.kneser_ney_bits(corpus, orders=(2, 5))
    assert n_grams[5] < n_grams[2] < unigram


def test_bits_per_character_scores_every_character_with_its_context():
    """Sliding windows by one give the loss of each character from the 16 before it."""
    torch.manual_seed(0)
    model = language_model.CharTransformer(12, d_model=16, n_layers=1, context=16).eval()
    text = torch.randint(12, (70,))
    nats = 0.0
    with torch.no_grad():
        for j in range(1, len(text)):
            logits = model(text[max(0, j - 16):j][None])[0, -1]
            nats += torch.nn.functional.cross_entropy(logits, text[j]).item()
    expected = nats / (len(text) - 1) / math.log(2)
    assert abs(language_model.bits_per_character(model, text, CPU, stride=1)
               - expected) < 1e-5
    wider = language_model.bits_per_character(model, text, CPU, stride=5)
    assert math.isfinite(wider) and wider != expected


def test_language_model_a_short_run():
    corpus = language_model.Corpus()
    result = language_model.train(steps=3, batch=4, progress=False, device=CPU, corpus=corpus,
                                  d_model=32, n_layers=1, context=16)
    losses = result["history"].losses
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    model = result["model"].eval()
    window = corpus.train[:16][None]
    changed = window.clone()
    changed[0, 10:] = 0
    with torch.no_grad():  # causal: later characters never change earlier predictions
        torch.testing.assert_close(model(window)[0, :10], model(changed)[0, :10])
    sample = model.sample(corpus.encode("Re"), 5, generator=torch.Generator().manual_seed(0))
    assert sample.shape == (7,) and corpus.decode(sample[:2]) == "Re"


def test_small_init_scales_the_residual_writers():
    model = language_model.CharTransformer(10, d_model=64, n_layers=2, context=8)
    layer = model.layers.layers[0]
    with torch.no_grad():
        assert abs(float(layer.linear1.weight.std()) - 0.02) < 0.003
        assert abs(float(layer.linear2.weight.std()) - 0.01) < 0.002  # 0.02 / sqrt(2 * 2)
        assert float(layer.linear1.bias.abs().max()) == 0.0


def test_question_answering_examples_mark_the_sentence_that_states_the_fact():
    """Every answer is the fact asked about, taken from the sentence about that person."""
    world = question_answering.World(seed=0)
    rng = random.Random(1)
    kinds = set()
    for _ in range(200):
        example = question_answering.make_example(world, rng)
        kinds.add(example.kind)
        words, start, end = example.passage, example.start, example.end
        sentence_start = max(i + 1 for i in range(-1, start) if i < 0 or words[i] == ".")
        sentence = words[sentence_start:words.index(".", start) + 1]
        if example.kind == "who":
            assert end == start + 1 and example.question[4] in sentence
        else:
            assert start == end
            name = example.question[2:4]
            assert " ".join(name) in " ".join(sentence)
            kind_words = {"where": world.cities, "when": question_answering.YEARS,
                          "what": question_answering.JOBS}[example.kind]
            assert words[start] in kind_words
        assert words.count(".") == 9
    assert kinds == set(question_answering.KINDS)


def test_question_answering_reader_scores_and_a_short_run():
    """Scores cover the passage only; without positions, moving a word moves its score."""
    world = question_answering.World(seed=0)
    data = question_answering.make_batch(world, 3, random.Random(2))
    reader = question_answering.SpanReader(len(world.words), d_model=32, positions="none").eval()
    length = int((data.passages[0] != 0).sum())
    question, passage = data.questions[:1], data.passages[:1, :length]  # no padding
    with torch.no_grad():
        starts, ends = reader(data.questions, data.passages)
        assert starts.shape == ends.shape == data.passages.shape
        assert torch.isinf(starts[data.passages == 0]).all()
        # a bag of words: read backwards, every word keeps its score
        forwards, backwards = reader(question, passage)[0], reader(question, passage.flip(1))[0]
        torch.testing.assert_close(backwards[0], forwards[0].flip(0), atol=1e-5, rtol=1e-5)
        rotary = question_answering.SpanReader(len(world.words), d_model=32).eval()
        forwards, backwards = rotary(question, passage)[0], rotary(question, passage.flip(1))[0]
        assert not torch.allclose(backwards[0], forwards[0].flip(0), atol=1e-3)
    maps = rotary.passage_attention(data.questions, data.passages)
    assert len(maps) == 2 and maps[0].shape == (3, 4) + 2 * (data.passages.shape[1],)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(3, 4, data.passages.shape[1]))
    result = question_answering.train(steps=4, batch=8, progress=False, device=CPU, test_size=20,
                                      d_model=32)
    losses = result["history"].losses
    assert len(losses) == 4 and all(math.isfinite(v) for v in losses)
    assert 0.0 <= result["accuracy"] <= 1.0 and set(result["by_kind"]) == set(question_answering.KINDS)


def test_exact_match_compares_the_answer_words():
    """A span with the right words counts, wherever they stand; a wrong span does not."""
    world = question_answering.World(seed=0)
    data = question_answering.make_batch(world, 1, random.Random(3))
    example = data.examples[0]

    class Pointer(torch.nn.Module):
        def __init__(self, start, end):
            super().__init__()
            self.start, self.end = start, end

        def forward(self, questions, passages):
            scores = torch.full(passages.shape, -10.0)
            starts, ends = scores.clone(), scores.clone()
            starts[0, self.start], ends[0, self.end] = 10.0, 10.0
            return starts, ends

    right = Pointer(example.start, example.end)
    assert question_answering.exact_match(right, data, CPU)[0] == 1.0
    wrong = Pointer(example.start + 1, example.end + 1)
    assert question_answering.exact_match(wrong, data, CPU)[0] == 0.0


def test_translation_recurrent_baseline_reads_the_sentence_last():
    """Chapter 1's GRU baseline: padding moved in front, so the last state follows <eos>."""
    source = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0], [3, 4, 5, 2]])
    assert translation.padded_in_front(source).tolist() == [[0, 5, 6, 2], [0, 0, 7, 2], [3, 4, 5, 2]]
    for attention in (False, True):
        run = translation.train_recurrent(attention, steps=3, batch=8, progress=False,
                                          embed_size=8, hidden_size=16)
        assert len(run["history"].losses) == 3 and 0.0 <= run["accuracy"] <= 1.0


def test_question_answering_positions_start_at_the_word_scale():
    """Added position vectors start with the squared norm of a word vector (d_model)."""
    torch.manual_seed(0)
    world = question_answering.World(seed=0)
    for positions in ("learned", "sinusoidal"):
        reader = question_answering.SpanReader(len(world.words), positions=positions)
        table = reader.table.detach()
        assert abs(table.pow(2).sum(1).mean().item() / 64 - 1) < 0.1
        assert (positions == "learned") == any(p is reader.table for p in reader.parameters())
    small = question_answering.SpanReader(len(world.words), positions="learned", position_scale=0.02)
    assert small.table.detach().pow(2).sum(1).mean().item() < 0.1


def test_experiment_forces_the_cpu_and_records_how_the_run_went(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_FORCE_CPU", raising=False)
    experiment = Experiment(tmp_path / "results.json")
    assert os.environ["COURSE_FORCE_CPU"] == "1"
    experiment.save({"accuracy": 0.5})
    saved = json.loads((tmp_path / "results.json").read_text())
    assert list(saved) == ["accuracy", "threads", "load_average_at_start", "wall_seconds"]
    assert saved["accuracy"] == 0.5 and saved["threads"] == 1 and saved["wall_seconds"] >= 0


def test_vision_baselines_score_the_same_split():
    """Three classical classifiers, each scored on the held-out fifth."""
    baselines = vision.baselines(split_seed=0)
    assert set(baselines) == {"1-nearest neighbour", "RBF SVM", "logistic regression"}
    assert all(0.9 < accuracy <= 1.0 for accuracy in baselines.values())


def test_subword_corpus_decodes_to_the_text_and_scores_the_same_characters():
    """BPE tokens join back into the text; bits per character divide by characters."""
    corpus = language_model.Corpus()
    subwords = language_model.SubwordCorpus(corpus, vocabulary=300)
    assert subwords.vocabulary == 300
    assert subwords.decode(subwords.train) == corpus.train_text
    assert len(subwords.test) < 0.7 * len(corpus.test)  # merges shorten the text
    # every character is a token of its own, so nothing held out is unknown
    assert all(c in subwords.pieces for c in corpus.characters)
    first = len(subwords.pieces[int(subwords.test[0])])
    assert subwords.scored_characters == len(corpus.test_text) - first
    torch.manual_seed(0)
    model = language_model.CharTransformer(subwords.vocabulary, d_model=16, n_layers=1, context=16)
    text = subwords.test[:200]
    nats, count = language_model.scored_nats(model, text, CPU, stride=4)
    assert count == len(text) - 1
    assert abs(nats / count / math.log(2) - language_model.bits_per_character(model, text, CPU, stride=4)) < 1e-9
    result = language_model.train(steps=2, batch=4, progress=False, device=CPU, corpus=subwords,
                                  d_model=16, n_layers=1, context=16, stride=16)
    nats, _ = language_model.scored_nats(result["model"], subwords.test, CPU, stride=16)
    assert abs(result["bits"] - nats / math.log(2) / subwords.scored_characters) < 1e-9


def test_vision_mean_pooling_and_smaller_training_sets():
    """Mean pooling has no class token and averages the patches; subsets are stratified."""
    model = vision.DigitViT(d_model=32, d_ff=32, pooling="mean").eval()
    images = vision.make_data(seed=0)[1].images[:3]
    tokens = model.tokens(images)
    assert tokens.shape == (3, 16, 32)
    with torch.no_grad():
        torch.testing.assert_close(model.classify(model.encoder(tokens).mean(dim=1)), model(images))
    with pytest.raises(ValueError):
        vision.DigitViT(pooling="max")
    small, test = vision.make_data(seed=0, train_size=100, subset_seed=1)
    assert len(small.labels) == 100 and torch.bincount(small.labels).tolist() == [10] * 10
    full, same_test = vision.make_data(seed=0)
    assert torch.equal(test.labels, same_test.labels)
    # the sample is drawn from the training split only
    full_set = {tuple(x.flatten().tolist()) for x in full.images}
    assert all(tuple(x.flatten().tolist()) in full_set for x in small.images)
    result = vision.train(steps=2, batch=16, progress=False, device=CPU, d_model=32, d_ff=32,
                          seed=1, split_seed=0, train_size=50, pooling="mean")
    assert len(result["train"].labels) == 50 and len(result["test"].labels) == 360


def test_classification_split_and_bag_of_words():
    """Labels are packages; no held-out docstring shares a 64-character span with training."""
    train, test, names = classification.make_data()
    assert names == list(classification.PACKAGES)
    assert len(train) > 150 and len(test) > 80
    assert set(y for _, y in train) == set(y for _, y in test) == set(range(len(names)))
    seen = language_model.spans("\n\n".join(t for t, _ in train))
    assert not any(language_model.spans(t) & seen for t, _ in test)
    accuracy = classification.bag_of_words(train, test)
    assert 1 / len(names) < accuracy <= 1.0


def test_classification_fine_tuning_runs_and_scratch_weights_are_random():
    """One step on eight docstrings; the random encoder has MiniLM's shapes, not its weights."""
    train, test, names = classification.make_data()
    result = classification.fine_tune(train[:8], test[:4], len(names), epochs=1, batch=8)
    assert result["steps"] == 1 and math.isfinite(result["losses"][0])
    assert len(result["predicted"]) == 4
    pretrained = classification.load_encoder(True).state_dict()
    scratch = classification.load_encoder(False).state_dict()
    assert pretrained.keys() == scratch.keys()
    key = "encoder.layer.0.attention.self.query.weight"
    assert pretrained[key].shape == scratch[key].shape
    assert not torch.allclose(pretrained[key], scratch[key])
