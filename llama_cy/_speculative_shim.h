// The boundary between llama_cy._speculative and llama.cpp's common_speculative
// (common/speculative.h, the drafting code llama-server runs).
//
// One Speculative holds common_speculative for the n_seq sequences of a target context,
// the token history and last draft of each sequence, and the common_batch that mirrors
// the target's batches into the draft context. The configuration crosses as JSON text.
// Every precondition that common_speculative asserts is checked here first and thrown
// as a C++ exception, which the Cython declarations (`except +`) turn into Python's.
#pragma once

#include "common.h"
#include "json.h"
#include "ngram-cache.h"
#include "speculative.h"
#include "../src/llama-ext.h"  // llama_model_target_layer_ids (EAGLE3), as speculative.cpp

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace lcy {

using json = common_json;

// A lookup-cache file as common_ngram_cache_load reads it (records of an n-gram, a count
// n > 0, then n pairs of token and count > 0), checked first: that loader aborts the
// process on a missing, truncated or malformed file.
inline void check_lookup_cache(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        throw std::invalid_argument("cannot open the lookup cache file '" + path + "'");
    }
    auto bad = [&](const char * why) {
        return std::invalid_argument("the lookup cache file '" + path + "' is " + why);
    };
    common_ngram ngram;
    int32_t n = 0;
    int32_t pair[2];
    while (f.read(reinterpret_cast<char *>(&ngram), sizeof(ngram))) {
        if (!f.read(reinterpret_cast<char *>(&n), sizeof(n)) || n <= 0) {
            throw bad("truncated or malformed");
        }
        for (int32_t i = 0; i < n; ++i) {
            if (!f.read(reinterpret_cast<char *>(pair), sizeof(pair)) || pair[1] <= 0) {
                throw bad("truncated or malformed");
            }
        }
    }
    if (f.gcount() != 0) {
        throw bad("truncated");
    }
}

struct Speculative {
    common_params_speculative params;
    common_speculative_ptr spec;
    common_batch batch;                       // process(): the target's batch, re-expressed
    std::vector<llama_tokens> history;        // per sequence: what drafting looks back on
    std::vector<llama_tokens> result;         // per sequence: the last draft
    // per sequence: each drafted token's candidate distribution (probabilistic drafting)
    std::vector<std::vector<std::vector<llama_token_data>>> result_q;
    std::vector<int32_t> n_drafted;           // per sequence: tokens accept() may confirm
    std::vector<char> begun;                  // per sequence: begin() was called
    std::vector<llama_pos> pos0;              // per sequence: where the draft starts
    std::vector<size_t> n_history;            // per sequence: the history's length so far
    llama_context * ctx_dft = nullptr;
    uint32_t n_seq = 0;
    int32_t n_vocab = 0;

    // `config`: {"types": [names], "n_max", "n_min", "p_min", "p_split", "ngram_simple":
    // {"size_n", "size_m", "min_hits"}, "ngram_map_k": {...}, "ngram_map_k4v": {...},
    // "ngram_mod": {"n_match", "n_min", "n_max"}, "ngram_cache": {"static", "dynamic"},
    // "synth_len", "synth_rates", "backend_sampling", "probabilistic"}; absent keys keep
    // llama.cpp's defaults.
    Speculative(const std::string & config, llama_context * tgt, llama_context * dft, uint32_t n_seq)
        : ctx_dft(dft), n_seq(n_seq) {
        const json cfg = json::parse(config);
        std::vector<std::string> names = cfg.at("types").get<std::vector<std::string>>();
        params.types = common_speculative_types_from_names(names);  // throws on unknown names
        for (auto t : params.types) {
            switch (t) {
                case COMMON_SPECULATIVE_TYPE_NONE:
                    throw std::invalid_argument("speculative type 'none' drafts nothing");
                case COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE:
                    if (dft == nullptr) {
                        throw std::invalid_argument("draft-simple needs a draft model");
                    }
                    break;
                case COMMON_SPECULATIVE_TYPE_DRAFT_MTP:
                    if (dft == nullptr) {  // llama_cy.Speculator makes it, on the target (mtp_of)
                        throw std::invalid_argument("draft-mtp needs an MTP context of the target");
                    }
                    break;
                case COMMON_SPECULATIVE_TYPE_DRAFT_EAGLE3: {
                    if (dft == nullptr) {
                        throw std::invalid_argument("draft-eagle3 needs its EAGLE3 draft model");
                    }
                    // common_speculative aborts on these: refused here first
                    const llama_model * md = llama_get_model(dft);
                    const uint32_t n_ids = llama_model_target_layer_ids_n(md);
                    if (n_ids != 3) {
                        throw std::invalid_argument("draft-eagle3: the draft names " + std::to_string(n_ids) +
                                                    " target layers, not 3");
                    }
                    const int32_t n_layer = llama_model_n_layer(llama_get_model(tgt));
                    const int32_t * ids = llama_model_target_layer_ids(md);
                    for (uint32_t k = 0; k < n_ids; ++k) {
                        if (ids[k] < 0 || ids[k] > n_layer) {
                            throw std::invalid_argument("draft-eagle3: the draft reads target layer " +
                                                        std::to_string(ids[k]) + "; the target has " +
                                                        std::to_string(n_layer));
                        }
                    }
                    break;
                }
                case COMMON_SPECULATIVE_TYPE_DRAFT_DFLASH:
                case COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK:
                    // They read the target's hidden states through a context built for them.
                    throw std::invalid_argument("speculative type '" + common_speculative_type_to_str(t) +
                                                "' is not supported by llama_cy (draft-simple, draft-eagle3, draft-mtp "
                                                "and the ngram types are)");
                default:
                    break;
            }
        }
        auto & d = params.draft;
        d.n_max = cfg.value("n_max", d.n_max);
        d.n_min = cfg.value("n_min", d.n_min);
        d.p_min = cfg.value("p_min", d.p_min);
        d.p_split = cfg.value("p_split", d.p_split);
        // draft-eagle3/-mtp sample their drafts in the draft graph (a top-k 10 chain there)
        d.backend_sampling = cfg.value("backend_sampling", d.backend_sampling);
        // --spec-draft-sampling probabilistic: draft-simple and draft-mtp sample their
        // drafts at the target's temperature and report each one's distribution
        d.probabilistic = cfg.value("probabilistic", d.probabilistic);
        d.ctx_tgt = tgt;
        d.ctx_dft = dft;
        if (d.n_max < 1) {
            throw std::invalid_argument("n_max (draft_max) must be at least 1, got " + std::to_string(d.n_max));
        }
        if (d.n_min < 0 || d.n_min > d.n_max) {
            throw std::invalid_argument("n_min (draft_min) must be in [0, n_max], got " + std::to_string(d.n_min));
        }
        auto ngram_map = [&](const char * key, common_params_speculative_ngram_map & m) {
            if (!cfg.contains(key)) {
                return;
            }
            const json & j = cfg.at(key);
            const int n = j.value("size_n", (int) m.size_n);
            const int mm = j.value("size_m", (int) m.size_m);
            const int hits = j.value("min_hits", (int) m.min_hits);
            if (n < 1 || n > 1024 || mm < 1 || mm > 1024 || hits < 1 || hits > 65535) {
                throw std::invalid_argument(std::string(key) + ": size_n and size_m must be in [1, 1024], min_hits >= 1");
            }
            m.size_n = (uint16_t) n;
            m.size_m = (uint16_t) mm;
            m.min_hits = (uint16_t) hits;
        };
        ngram_map("ngram_simple", params.ngram_simple);
        ngram_map("ngram_map_k", params.ngram_map_k);
        ngram_map("ngram_map_k4v", params.ngram_map_k4v);
        if (cfg.contains("ngram_mod")) {
            const json & j = cfg.at("ngram_mod");
            auto & m = params.ngram_mod;
            m.n_match = j.value("n_match", m.n_match);
            m.n_min = j.value("n_min", m.n_min);
            m.n_max = j.value("n_max", m.n_max);
            if (m.n_match < 1 || m.n_min < 0 || m.n_max < 1 || m.n_min > m.n_max || m.n_max > 1024) {
                throw std::invalid_argument("ngram_mod: need n_match >= 1 and 0 <= n_min <= n_max <= 1024");
            }
        }
        if (cfg.contains("ngram_cache")) {
            const json & j = cfg.at("ngram_cache");
            params.ngram_cache.lookup_cache_static = j.value("static", std::string());
            params.ngram_cache.lookup_cache_dynamic = j.value("dynamic", std::string());
            for (const auto & path : { params.ngram_cache.lookup_cache_static,
                                       params.ngram_cache.lookup_cache_dynamic }) {
                if (!path.empty()) {
                    check_lookup_cache(path);
                }
            }
        }
        if (cfg.contains("synth_len")) {
            params.synth_len = cfg.at("synth_len").get<double>();
        }
        if (cfg.contains("synth_rates")) {
            const json & rates = cfg.at("synth_rates");
            for (size_t i = 0; i < rates.size(); ++i) {
                params.synth_rates.push_back(rates.at(i).get<double>());
            }
        }
        if (dft != nullptr && llama_n_seq_max(dft) != n_seq) {
            throw std::invalid_argument("the draft context must have as many sequences as the target");
        }
        // Throws on a draft model whose vocabulary differs, and on bad synthetic rates.
        spec.reset(common_speculative_init(params, n_seq));
        if (!spec) {
            throw std::invalid_argument("no speculative implementation was initialised");
        }
        if (dft != nullptr) {
            batch = common_batch(dft);
        }
        n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(tgt)));
        history.resize(n_seq);
        n_history.assign(n_seq, 0);
        result.resize(n_seq);
        result_q.resize(n_seq);
        n_drafted.assign(n_seq, 0);
        begun.assign(n_seq, 0);
        pos0.assign(n_seq, 0);
    }

    void check_seq(int32_t seq) const {
        if (seq < 0 || (uint32_t) seq >= n_seq) {
            throw std::out_of_range("seq_id " + std::to_string(seq) + " is out of range [0, " +
                                    std::to_string(n_seq) + ")");
        }
    }

    int32_t n_max() const { return common_speculative_n_max(spec.get()); }

    std::string types() const { return common_speculative_type_name_str(params.types); }

    const std::vector<double> & synth_probs() const { return common_speculative_get_synth_probs(spec.get()); }

    // A new generation on `seq`: its prompt, for the implementations that index it.
    void begin(int32_t seq, const llama_token * tokens, size_t n) {
        check_seq(seq);
        history[seq].assign(tokens, tokens + n);
        n_history[seq] = n;
        n_drafted[seq] = 0;
        begun[seq] = 1;
        common_speculative_begin(spec.get(), seq, history[seq]);
    }

    // What the target decoded goes into the draft context too (a no-op for the ngram types).
    void process(const llama_batch & b) {
        if (ctx_dft == nullptr) {
            return;
        }
        if (b.token == nullptr) {
            throw std::invalid_argument("speculative decoding takes token batches, not embeddings");
        }
        batch.clear();
        std::vector<llama_seq_id> seqs;
        for (int32_t i = 0; i < b.n_tokens; ++i) {
            const int32_t ns = b.n_seq_id ? b.n_seq_id[i] : 1;
            const llama_seq_id s0 = b.seq_id ? b.seq_id[i][0] : 0;
            const bool out = b.logits ? b.logits[i] != 0 : i == b.n_tokens - 1;
            const llama_pos pos = b.pos[i];
            if (ns <= 1) {
                batch.add(b.token[i], pos, s0, out);
            } else {
                seqs.assign(b.seq_id[i], b.seq_id[i] + ns);
                batch.add(b.token[i], pos, seqs, out);
            }
        }
        if (!common_speculative_process(spec.get(), batch)) {
            throw std::runtime_error("the draft model failed to decode the target's batch");
        }
    }

    // Ask for a draft on `seq` after `id_last` (sampled, not yet decoded, at `pos`), with
    // `tokens` (the sequence's tokens so far) as the history; at most `n_max` tokens.
    void request(int32_t seq, int32_t n_max, llama_pos pos, llama_token id_last, const llama_token * tokens,
                 size_t n, float temp, uint32_t seed, bool want_q) {
        check_seq(seq);
        if (!begun[seq]) {
            throw std::logic_error("begin() was not called for seq_id " + std::to_string(seq));
        }
        if (n_max < 1) {
            throw std::invalid_argument("a draft needs n_max >= 1");
        }
        history[seq].assign(tokens, tokens + n);
        if (n < n_history[seq]) {
            // The history lost tokens (a context shift): the n-gram maps index positions
            // in it and abort on a shorter one, so they start over from what is left.
            common_speculative_begin(spec.get(), seq, history[seq]);
        }
        n_history[seq] = n;
        result[seq].clear();
        result_q[seq].clear();
        n_drafted[seq] = 0;
        pos0[seq] = pos;
        common_speculative_get_draft_params(spec.get(), seq) = {
            /* .drafting = */ true,
            /* .n_max    = */ n_max,
            /* .pos0     = */ pos,
            /* .id_last  = */ id_last,
            /* .prompt   = */ &history[seq],
            /* .result   = */ &result[seq],
            /* .result_q = */ want_q ? &result_q[seq] : nullptr,
            /* .temp     = */ temp,
            /* .seed     = */ seed,
        };
    }

    // Draft for every requested sequence at once (a draft model decodes them in one batch).
    void draft() {
        std::vector<int32_t> asked;
        for (uint32_t s = 0; s < n_seq; ++s) {
            if (common_speculative_get_draft_params(spec.get(), s).drafting) {
                asked.push_back((int32_t) s);
            }
        }
        common_speculative_draft(spec.get());
        for (int32_t s : asked) {
            // A lookup cache file may hold ids outside this vocabulary: the draft ends there.
            auto & r = result[s];
            for (size_t i = 0; i < r.size(); ++i) {
                if (r[i] < 0 || r[i] >= n_vocab) {
                    r.resize(i);
                    break;
                }
            }
            // a drafter that fills no distribution (or not one per token) leaves none:
            // the target verifies by matching then, as llama-server falls back
            auto & q = result_q[s];
            if (q.size() < r.size()) {
                q.clear();
            } else {
                q.resize(r.size());
            }
            n_drafted[s] = (int32_t) r.size();
            if (ctx_dft != nullptr) {
                // Drafting decoded id_last and the draft into the draft context; the
                // target's next batch brings them back through process(), as in llama-server.
                llama_memory_seq_rm(llama_get_memory(ctx_dft), s, pos0[s], -1);
            }
        }
    }

    const llama_tokens & get_result(int32_t seq) const {
        check_seq(seq);
        return result[seq];
    }

    // The candidate distributions of the last draft's tokens (empty: none reported).
    const std::vector<std::vector<llama_token_data>> & get_result_q(int32_t seq) const {
        check_seq(seq);
        return result_q[seq];
    }

    bool probabilistic() const { return params.draft.probabilistic; }

    // The target kept `n` tokens of the last draft on `seq`.
    void accept(int32_t seq, int32_t n) {
        check_seq(seq);
        if (n < 0 || n > n_drafted[seq]) {
            throw std::out_of_range("accepted " + std::to_string(n) + " tokens of a draft of " +
                                    std::to_string(n_drafted[seq]));
        }
        const bool had = n_drafted[seq] > 0;
        n_drafted[seq] = 0;
        if (had) {
            common_speculative_accept(spec.get(), seq, (uint16_t) n);
        }
    }
};

}  // namespace lcy
