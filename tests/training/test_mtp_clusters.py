"""Token clusters of the MTP head (tools.training.mtp_clusters, MTPDrafter._score): tiny random
Gemma 3, no real weights.

The clusters must partition every token outside the static candidates (balanced), q must
stay the exact law of the draft when each step also scores its best clusters' tokens (a
token that is both a context candidate and in a chosen cluster counts once), tokens
outside the static set and the context really get drafted, and decoding stays lossless
(greedy equality for chains and trees, the first sampled token distributed as p).  A
mutant that scores such a token twice must fail the exactness check.
"""

from __future__ import annotations

import pytest
import torch

from playground.decoding.sampling import SamplingParams, logits_to_probs
from playground.drafters.mtp import MTPDrafter
from playground.drafters.mtp_head import cluster_members
from playground.drafters.mtp_weights import load_head, save_head
from playground.models.tiny import EOS as CHAR_EOS
from playground.models.tiny import CharTokenizer
from playground.settings import RunSettings
from tests.contract import assert_first_token_distribution, assert_greedy_equals_target, assert_q_rows
from tests.tiny_models import VOCAB, first_draft_state, prefix_state, rand_ids, tiny_head, tiny_target
from tools.training.mtp_clusters import balanced_clusters

K, M = 8, 2  # clusters, clusters scored per step


@pytest.fixture(scope="module")
def target():
    return tiny_target()


@pytest.fixture(scope="module")
def head(target):
    return tiny_head(target, n_cand=60, noise=0.3, seed=4, num_clusters=K, clusters_per_step=M)


@pytest.mark.parametrize("k", [1, 2, 8, 32])
def test_clusters_partition_the_rest_of_the_vocabulary_evenly(k):
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(300, 16, generator=g)
    static = torch.zeros(300, dtype=torch.bool)
    static[torch.randperm(300, generator=g)[:45]] = True
    tc = balanced_clusters(emb, static, k)
    assert tc.dtype == torch.int16
    assert bool((tc[static] == -1).all()) and bool((tc[~static] >= 0).all())
    sizes = torch.bincount(tc[~static].long(), minlength=k)
    assert sizes.numel() == k and int(sizes.max() - sizes.min()) <= 1
    assert torch.equal(tc, balanced_clusters(emb, static, k))  # deterministic
    members = cluster_members(tc, k)
    got = members[members >= 0]
    assert sorted(got.tolist()) == torch.nonzero(~static).squeeze(-1).tolist()  # every token once
    for c in range(k):
        assert bool((tc[members[c][members[c] >= 0]] == c).all())


def test_clusters_group_similar_embeddings():
    """Two well-separated groups of embeddings end up in two different clusters."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(1, 8, generator=g) * 5 + torch.randn(20, 8, generator=g) * 0.1
    b = -a + torch.randn(20, 8, generator=g) * 0.1
    tc = balanced_clusters(torch.cat([a, b]), torch.zeros(40, dtype=torch.bool), 2)
    assert len(set(tc[:20].tolist())) == 1 and len(set(tc[20:].tolist())) == 1 and tc[0] != tc[20]


@pytest.mark.parametrize("k", [0, 3, 6])
def test_cluster_count_must_be_a_power_of_two(k):
    with pytest.raises(ValueError, match="power of two"):
        balanced_clusters(torch.randn(10, 4), torch.zeros(10, dtype=torch.bool), k)


def _expected_first_row(target, head, state, params):
    """q of draft 1 recomputed from scratch: full-vocabulary logits s1 @ E^T restricted to
    static ∪ context ∪ the tokens of the M best clusters of s1, then temperature/top-k/top-p."""
    with torch.no_grad():
        s = first_draft_state(target, head, state.committed_ids)
        support = torch.zeros(VOCAB, dtype=torch.bool)
        support[head.candidates] = True
        support[torch.tensor(state.committed_ids)] = True
        best = head.cluster_proj(s).topk(M).indices
        support |= torch.isin(head.token_cluster.long(), best)
        logits = (s @ target.model.embed_tokens.weight.t()).masked_fill(~support, float("-inf"))
        return logits_to_probs(logits, params), support


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(temperature=1.0),
        SamplingParams(temperature=0.7, top_k=20),
        SamplingParams(temperature=1.3, top_p=0.8),
    ],
)
@pytest.mark.parametrize("seed", [5, 6, 7])
def test_q_rows_exact_with_clusters(target, head, params, seed):
    d = MTPDrafter(target, head, eos_token_ids=[])
    state = prefix_state(target, rand_ids(12, seed=seed))
    draft = d.propose(state, 4, params, torch.Generator().manual_seed(0))
    q = assert_q_rows(draft)
    expected, support = _expected_first_row(target, head, state, params)
    assert float(q[0, ~support].abs().sum()) == 0.0
    torch.testing.assert_close(q[0], expected, rtol=1e-5, atol=1e-6)


def test_mutant_scoring_a_context_token_twice_is_caught(target, head, monkeypatch):
    """Without the duplicate mask, a context token inside a chosen cluster gets two columns,
    so its q is inflated: the exactness check must see it."""
    original = MTPDrafter._score
    caught = 0
    for seed in range(5, 25):
        state = prefix_state(target, rand_ids(12, seed=seed))
        params = SamplingParams(temperature=1.0)
        d = MTPDrafter(target, head, eos_token_ids=[])

        def no_dup_mask(self, states):
            self.in_extra.zero_()
            return original(self, states)

        monkeypatch.setattr(MTPDrafter, "_score", no_dup_mask)
        q = d.propose(state, 1, params, torch.Generator().manual_seed(0)).draft_probs
        monkeypatch.setattr(MTPDrafter, "_score", original)
        expected, _ = _expected_first_row(target, head, state, params)
        caught += not torch.allclose(q[0], expected, rtol=1e-5, atol=1e-6)
    assert caught > 0


def test_tokens_outside_static_and_context_are_drafted(target, head):
    """The clusters are not decoration: greedy drafts include tokens that are neither static
    candidates nor in the context, and the union of all clusters with the static set is the
    whole vocabulary."""
    members = cluster_members(head.token_cluster, K)
    reach = torch.zeros(VOCAB, dtype=torch.bool)
    reach[head.candidates] = True
    reach[members[members >= 0]] = True
    assert bool(reach.all())
    static = set(head.candidates.tolist())
    outside = 0
    for seed in range(10):
        ids = rand_ids(10, seed=seed)
        d = MTPDrafter(target, head, eos_token_ids=[])
        draft = d.propose(prefix_state(target, ids), 4, SamplingParams(), None)
        outside += sum(t not in static and t not in ids for t in draft.token_ids)
    assert outside > 0
    info = MTPDrafter(target, head, eos_token_ids=[])._info(None, 0, 0)
    assert info["candidates_scored"] == 60 + M * int(members.shape[1])


def test_save_load_keeps_the_clusters(tmp_path, target, head):
    save_head(head, tmp_path)
    loaded = load_head(tmp_path)
    assert loaded.cfg == head.cfg
    assert loaded.token_cluster.dtype == torch.int16 and torch.equal(loaded.token_cluster, head.token_cluster)
    state = prefix_state(target, rand_ids(9, seed=3))
    a = MTPDrafter(target, head.float(), eos_token_ids=[]).propose(state, 3, SamplingParams(), None)
    b = MTPDrafter(target, loaded, eos_token_ids=[]).propose(state, 3, SamplingParams(), None)
    assert len(b.token_ids) == 3 and a.token_ids[0] == b.token_ids[0]  # bf16 storage: the first draft agrees


def test_int8_storage_halves_the_bytes_and_stays_close(tmp_path, target):
    from playground.drafters.mtp_head import MTPConfig, MTPHead
    from playground.drafters.mtp_weights import weight_files

    big = MTPHead(MTPConfig.from_target(target.config, num_candidates=60, num_clusters=K, intermediate_size=1024))
    save_head(big, tmp_path / "bf16")
    save_head(big, tmp_path / "int8", int8=True)
    size = {k: sum(f.stat().st_size for f in weight_files(tmp_path / k)) for k in ("bf16", "int8")}
    assert size["int8"] < 0.7 * size["bf16"]
    loaded = load_head(tmp_path / "int8")
    for name, w in big.state_dict().items():
        if w.is_floating_point():
            err = float((loaded.state_dict()[name] - w).abs().max())
            assert err <= float(w.abs().max()) / 100 + 1e-6, name


@pytest.mark.parametrize("nodes", [1, 6])
@pytest.mark.parametrize("gamma", [1, 3])
def test_greedy_equality_with_clusters(gamma, nodes):
    model = tiny_target(seed=11)
    h = tiny_head(model, n_cand=40, noise=0.2, seed=3, num_clusters=K, clusters_per_step=M)
    tok = CharTokenizer()
    for prompt in ("the cat sat. the cat ran. the c", "abcabcabd abcabx"):
        cfg = RunSettings(gamma=gamma, temperature=0.0, max_new_tokens=20, tree_nodes=nodes)
        assert_greedy_equals_target(
            model,
            tok,
            tok.encode(prompt),
            cfg,
            MTPDrafter(model, h, eos_token_ids=[CHAR_EOS]),
            eos_token_ids=[CHAR_EOS],
            msg=prompt,
        )


@pytest.mark.parametrize("nodes", [1, 6])
def test_first_sampled_token_matches_the_target_with_clusters(nodes):
    model = tiny_target()
    h = tiny_head(model, n_cand=40, noise=0.3, seed=5, num_clusters=K, clusters_per_step=M)
    prompt = CharTokenizer().encode("the cat sat")
    cfg = RunSettings(gamma=2, temperature=1.0, max_new_tokens=2, trace=False, tree_nodes=nodes)
    assert_first_token_distribution(
        model, CharTokenizer(), prompt, cfg, lambda: MTPDrafter(model, h, eos_token_ids=[CHAR_EOS]), 1200, [CHAR_EOS]
    )
