// llama_loop: a minimal native generation loop on llama.cpp's C API.
//
// It is the yardstick for llama_cy: tests compare the Python loop's tokens with the ones
// printed here, and the benchmark compares speeds, so the loop does nothing beyond what
// the Python loop must do (tokenize, decode the prompt, then sample + decode per token).
// Every context setting not named on the command line keeps llama.cpp's default, so the
// Python side gets identical numerics by keeping the same defaults.
//
// Usage:
//   llama_loop --lib-dir DIR [--plugin PATH] --model PATH --prompt TEXT --n-predict N
//              [--threads T] [--ctx C] [--batch B] [--ngl L] [--n-seq 1] [--verbose] [--warmup]
//              [--sampler greedy | --sampler dist [--seed S] [--top-k K] [--temp X]]
//              [--backend-sampling]   (the chain runs in the graph: llama_set_sampler)
//              [--repeat R]   (R runs in one context, the first untimed: a warm loop's rate)
//              [--flash-attn on|off|auto]   (llama.cpp's default: auto)
//   --plugin: one more backend plugin, outside DIR (a CUDA wheel's, from its pack)
//
// Output: one JSON object on stdout; errors go to stderr with a non-zero exit status
// (2 for a bad command line, 1 for a failure at run time).

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"

namespace {

struct Options {
    std::string lib_dir;
    std::string plugin;  // a backend plugin outside lib_dir (llama_cy._cuda_packs.selected)
    std::string model;
    std::string prompt;
    bool has_prompt = false;  // an empty prompt is allowed, a missing one is not
    int n_predict = -1;
    int threads = 0;  // 0: keep llama.cpp's default thread count
    int ctx = 512;
    int batch = 512;
    int ngl = 0;
    int n_seq = 1;
    bool verbose = false;
    bool backend_sampling = false;  // attach the chain to sequence 0 (llama_set_sampler)
    bool warmup = false;  // decode the prompt once untimed first (as llama.cpp's tools warm up)
    int repeat = 1;       // runs of prompt + generation; with more than one, the first is a warm-up
    std::string sampler = "greedy";
    uint32_t seed = 0;  // fixed by default: LLAMA_DEFAULT_SEED would pick a random one
    int top_k = 40;
    float temp = 0.8f;
    llama_flash_attn_type flash_attn = LLAMA_FLASH_ATTN_TYPE_AUTO;  // llama.cpp's default
};

[[noreturn]] void usage_error(const std::string & msg) {
    std::fprintf(stderr, "llama_loop: %s\n", msg.c_str());
    std::fprintf(stderr,
                 "usage: llama_loop --lib-dir DIR --model PATH --prompt TEXT --n-predict N "
                 "[--threads T] [--ctx C] [--batch B] [--ngl L] [--n-seq 1] [--verbose] "
                 "[--sampler greedy | --sampler dist --seed S --top-k K --temp X] "
                 "[--backend-sampling] [--repeat R] [--flash-attn on|off|auto]\n");
    std::exit(2);
}

long parse_int(const char * flag, const char * text, long lo, long hi) {
    char * end = nullptr;
    errno = 0;
    const long v = std::strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
        usage_error(std::string("bad value for ") + flag + ": '" + text + "'");
    }
    return v;
}

float parse_float(const char * flag, const char * text) {
    char * end = nullptr;
    errno = 0;
    const float v = std::strtof(text, &end);
    if (errno != 0 || end == text || *end != '\0') {
        usage_error(std::string("bad value for ") + flag + ": '" + text + "'");
    }
    return v;
}

Options parse_args(int argc, char ** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string flag = argv[i];
        if (flag == "--verbose") {
            o.verbose = true;
            continue;
        }
        if (flag == "--backend-sampling") {
            o.backend_sampling = true;
            continue;
        }
        if (flag == "--warmup") {
            o.warmup = true;
            continue;
        }
        // Every other flag takes the next argument verbatim, so a prompt may start with '-'.
        if (i + 1 >= argc) {
            usage_error("missing value for " + flag);
        }
        const char * v = argv[++i];
        if (flag == "--lib-dir") {
            o.lib_dir = v;
        } else if (flag == "--plugin") {
            o.plugin = v;
        } else if (flag == "--model") {
            o.model = v;
        } else if (flag == "--prompt") {
            o.prompt = v;
            o.has_prompt = true;
        } else if (flag == "--n-predict") {
            o.n_predict = (int) parse_int("--n-predict", v, 0, 1L << 30);
        } else if (flag == "--threads") {
            o.threads = (int) parse_int("--threads", v, 1, 1024);
        } else if (flag == "--ctx") {
            o.ctx = (int) parse_int("--ctx", v, 1, 1L << 30);
        } else if (flag == "--batch") {
            o.batch = (int) parse_int("--batch", v, 1, 1L << 30);
        } else if (flag == "--ngl") {
            o.ngl = (int) parse_int("--ngl", v, -1, 1L << 20);
        } else if (flag == "--n-seq") {
            o.n_seq = (int) parse_int("--n-seq", v, 1, 1);  // only one sequence for now
        } else if (flag == "--flash-attn") {
            const std::string fa = v;
            if (fa == "on") {
                o.flash_attn = LLAMA_FLASH_ATTN_TYPE_ENABLED;
            } else if (fa == "off") {
                o.flash_attn = LLAMA_FLASH_ATTN_TYPE_DISABLED;
            } else if (fa != "auto") {
                usage_error("--flash-attn must be 'on', 'off' or 'auto'");
            }
        } else if (flag == "--sampler") {
            o.sampler = v;
            if (o.sampler != "greedy" && o.sampler != "dist") {
                usage_error("--sampler must be 'greedy' or 'dist'");
            }
        } else if (flag == "--repeat") {
            o.repeat = (int) parse_int("--repeat", v, 1, 1000);
        } else if (flag == "--seed") {
            o.seed = (uint32_t) parse_int("--seed", v, 0, UINT32_MAX);
        } else if (flag == "--top-k") {
            o.top_k = (int) parse_int("--top-k", v, INT32_MIN, INT32_MAX);
        } else if (flag == "--temp") {
            o.temp = parse_float("--temp", v);
        } else {
            usage_error("unknown option " + flag);
        }
    }
    if (o.lib_dir.empty()) usage_error("--lib-dir is required");
    if (o.model.empty()) usage_error("--model is required");
    if (!o.has_prompt) usage_error("--prompt is required");
    if (o.n_predict < 0) usage_error("--n-predict is required");
    return o;
}

void quiet_log(ggml_log_level, const char *, void *) {}

// Appends the code point as JSON \u escapes (a surrogate pair above the BMP), so stdout
// stays pure ASCII whatever the console's encoding.
void append_u_escape(std::string & out, uint32_t cp) {
    char buf[16];
    if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
    } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
}

// JSON string literal for UTF-8 bytes. Generation can stop inside a multi-byte character,
// so the bytes need not be valid UTF-8: each maximal ill-formed subpart becomes U+FFFD,
// which is what Python's bytes.decode("utf-8", "replace") does, so both sides agree.
std::string json_string(const std::string & bytes) {
    std::string out = "\"";
    const auto * s = reinterpret_cast<const unsigned char *>(bytes.data());
    const size_t n = bytes.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char b = s[i];
        if (b < 0x80) {
            switch (b) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                case '\b': out += "\\b"; break;
                case '\f': out += "\\f"; break;
                default:
                    if (b < 0x20) {
                        append_u_escape(out, b);
                    } else {
                        out += (char) b;
                    }
            }
            ++i;
            continue;
        }
        // Well-formed sequences (Unicode Table 3-7): length, and the allowed range of the
        // second byte; later continuation bytes are always 80..BF.
        int len = 0;
        unsigned char lo = 0x80, hi = 0xBF;
        uint32_t cp = 0;
        if (b >= 0xC2 && b <= 0xDF) {
            len = 2; cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            len = 3; cp = b & 0x0F;
            if (b == 0xE0) lo = 0xA0;  // no overlong forms
            if (b == 0xED) hi = 0x9F;  // no surrogates
        } else if (b >= 0xF0 && b <= 0xF4) {
            len = 4; cp = b & 0x07;
            if (b == 0xF0) lo = 0x90;  // no overlong forms
            if (b == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
        }
        int k = 1;  // bytes of the sequence accepted so far
        if (len > 0) {
            for (; k < len && i + k < n; ++k) {
                const unsigned char c = s[i + k];
                if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
                cp = (cp << 6) | (c & 0x3F);
            }
        }
        if (len > 0 && k == len) {
            append_u_escape(out, cp);
        } else {
            append_u_escape(out, 0xFFFD);
        }
        i += k;
    }
    out += '"';
    return out;
}

template <typename T> std::string json_array(const std::vector<T> & v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        out += std::to_string(v[i]);
    }
    return out + "]";
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int fail(const std::string & msg) {
    std::fprintf(stderr, "llama_loop: error: %s\n", msg.c_str());
    return 1;
}

int run(const Options & o) {
    using clock = std::chrono::steady_clock;

    ggml_backend_load_all_from_path(o.lib_dir.c_str());
    if (!o.plugin.empty() && ggml_backend_load(o.plugin.c_str()) == nullptr) {
        return fail("the backend plugin '" + o.plugin + "' did not load");
    }
    if (ggml_backend_dev_count() == 0) {
        return fail("no ggml backend could be loaded from '" + o.lib_dir + "'");
    }

    // load_ms: model file to a context ready to decode (backend discovery excluded).
    // Checked here because the quiet log would hide llama.cpp's reason for this failure.
    if (std::FILE * f = std::fopen(o.model.c_str(), "rb")) {
        std::fclose(f);
    } else {
        return fail("cannot open model '" + o.model + "': " + std::strerror(errno));
    }

    const auto t_load = clock::now();
    llama_model_params mparams = llama_model_default_params();
    mparams.n_gpu_layers = o.ngl;
    std::unique_ptr<llama_model, decltype(&llama_model_free)> model(
        llama_model_load_from_file(o.model.c_str(), mparams), llama_model_free);
    if (!model) {
        return fail("failed to load model '" + o.model + "'" +
                    (o.verbose ? "" : " (rerun with --verbose for llama.cpp's log)"));
    }
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx = (uint32_t) o.ctx;
    cparams.n_batch = (uint32_t) o.batch;
    cparams.n_seq_max = (uint32_t) o.n_seq;
    cparams.flash_attn_type = o.flash_attn;
    if (o.threads > 0) {
        cparams.n_threads = o.threads;
        cparams.n_threads_batch = o.threads;
    }
    // A persistent threadpool, as llama.cpp's common code gives its tools (llama-cli,
    // llama-server): without one, ggml starts and joins threads on every decode. Created
    // before the context so that it outlives it.
    using tp_new_t = ggml_threadpool_t (*)(ggml_threadpool_params *);
    using tp_free_t = void (*)(ggml_threadpool_t);
    ggml_backend_reg_t cpu = ggml_backend_reg_by_name("CPU");
    auto tp_new = (tp_new_t) ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_new");
    auto tp_free = (tp_free_t) ggml_backend_reg_get_proc_address(cpu, "ggml_threadpool_free");
    ggml_threadpool_params tpp = ggml_threadpool_params_default(cparams.n_threads);
    std::unique_ptr<ggml_threadpool, tp_free_t> pool(tp_new ? tp_new(&tpp) : nullptr, tp_free);
    std::unique_ptr<llama_context, decltype(&llama_free)> ctx(
        llama_init_from_model(model.get(), cparams), llama_free);
    if (!ctx) {
        return fail("failed to create a context (n_ctx=" + std::to_string(o.ctx) + ")");
    }
    if (pool) {
        llama_attach_threadpool(ctx.get(), pool.get(), pool.get());
    }
    const double load_ms = ms_since(t_load);

    const llama_vocab * vocab = llama_model_get_vocab(model.get());

    // A first call with no room returns minus the token count; the second fills the buffer.
    const int32_t need = -llama_tokenize(vocab, o.prompt.data(), (int32_t) o.prompt.size(),
                                         nullptr, 0, /*add_special=*/true, /*parse_special=*/false);
    if (need <= 0) {
        return fail("the prompt tokenizes to no tokens (or overflows)");
    }
    std::vector<llama_token> prompt(need);
    if (llama_tokenize(vocab, o.prompt.data(), (int32_t) o.prompt.size(), prompt.data(), need,
                       true, false) != need) {
        return fail("tokenization failed");
    }
    // The prompt goes in one decode call, and every sampled token but the last is decoded.
    if (need > (int32_t) cparams.n_batch) {
        return fail("prompt has " + std::to_string(need) + " tokens, more than --batch " +
                    std::to_string(o.batch));
    }
    const uint32_t n_ctx = llama_n_ctx(ctx.get());
    if ((uint64_t) need + (uint64_t) (o.n_predict > 0 ? o.n_predict - 1 : 0) > n_ctx) {
        return fail("prompt (" + std::to_string(need) + " tokens) + n_predict (" +
                    std::to_string(o.n_predict) + ") does not fit in n_ctx " +
                    std::to_string(n_ctx));
    }

    // Built before the clock starts: creating the chain is setup, not generation.
    std::unique_ptr<llama_sampler, decltype(&llama_sampler_free)> smpl(
        llama_sampler_chain_init(llama_sampler_chain_default_params()), llama_sampler_free);
    if (o.sampler == "greedy") {
        llama_sampler_chain_add(smpl.get(), llama_sampler_init_greedy());
    } else {
        llama_sampler_chain_add(smpl.get(), llama_sampler_init_top_k(o.top_k));
        llama_sampler_chain_add(smpl.get(), llama_sampler_init_temp(o.temp));
        llama_sampler_chain_add(smpl.get(), llama_sampler_init_dist(o.seed));
    }

    if (o.backend_sampling && !llama_set_sampler(ctx.get(), 0, smpl.get())) {
        return fail("llama_set_sampler refused the chain");
    }

    if (o.warmup) {
        if (llama_decode(ctx.get(), llama_batch_get_one(prompt.data(), need)) != 0) {
            return fail("llama_decode failed on the warm-up");
        }
        llama_synchronize(ctx.get());
        llama_memory_clear(llama_get_memory(ctx.get()), true);
    }

    // gen_ms: each step samples from the last logits, then decodes the new token so the
    // next step has logits. The final token is not decoded (nothing would read its
    // logits), so N tokens cost N samples and N-1 decodes; an end-of-generation token
    // costs one extra sample and is neither kept nor decoded. With --repeat R the whole
    // run repeats in the same context (memory cleared, chain reset): the first run warms
    // the backend (a GPU's captured graphs), the others are timed and their rates averaged.
    std::vector<llama_token> out;
    double prompt_ms = 0.0;
    double gen_ms = 0.0;
    double rate_sum = 0.0;
    for (int run = 0; run < o.repeat; ++run) {
        if (run > 0) {
            llama_memory_clear(llama_get_memory(ctx.get()), true);
            llama_sampler_reset(smpl.get());
        }
        out.clear();
        const auto t_prompt = clock::now();
        int32_t rc = llama_decode(ctx.get(), llama_batch_get_one(prompt.data(), need));
        if (rc != 0) {
            return fail("llama_decode failed on the prompt (code " + std::to_string(rc) + ")");
        }
        prompt_ms = ms_since(t_prompt);
        const auto t_gen = clock::now();
        for (int i = 0; i < o.n_predict; ++i) {
            llama_token tok = llama_sampler_sample(smpl.get(), ctx.get(), -1);
            if (llama_vocab_is_eog(vocab, tok)) {
                break;
            }
            out.push_back(tok);
            if (i + 1 < o.n_predict) {
                rc = llama_decode(ctx.get(), llama_batch_get_one(&tok, 1));
                if (rc != 0) {
                    return fail("llama_decode failed at generated token " + std::to_string(i) +
                                " (code " + std::to_string(rc) + ")");
                }
            }
        }
        gen_ms = ms_since(t_gen);
        if (run > 0 || o.repeat == 1) {
            rate_sum += gen_ms > 0.0 ? (double) out.size() * 1000.0 / gen_ms : 0.0;
        }
    }
    std::string text;
    std::vector<char> piece(64);
    if (o.backend_sampling) {
        llama_set_sampler(ctx.get(), 0, nullptr);  // the chain is freed before the context
    }

    // Detokenized outside the timed loop: the benchmark measures generation, not text.
    for (llama_token tok : out) {
        int32_t len = llama_token_to_piece(vocab, tok, piece.data(), (int32_t) piece.size(), 0,
                                           /*special=*/false);
        if (len < 0) {  // too small: -len is the size needed
            piece.resize((size_t) -len);
            len = llama_token_to_piece(vocab, tok, piece.data(), (int32_t) piece.size(), 0, false);
        }
        if (len < 0) {
            return fail("llama_token_to_piece failed for token " + std::to_string(tok));
        }
        text.append(piece.data(), (size_t) len);
    }

    // Raw bytes in hex too: "text" cannot carry an incomplete UTF-8 tail exactly.
    std::string hex;
    static const char digits[] = "0123456789abcdef";
    for (unsigned char c : text) {
        hex += digits[c >> 4];
        hex += digits[c & 0xF];
    }

    const size_t n_gen = out.size();
    const double tps = rate_sum / (o.repeat > 1 ? o.repeat - 1 : 1);
    std::printf(
        "{\"prompt_tokens\": %s, \"tokens\": %s, \"text\": %s, \"text_hex\": \"%s\", "
        "\"load_ms\": %.3f, \"prompt_ms\": %.3f, \"gen_ms\": %.3f, \"n_gen\": %zu, "
        "\"tokens_per_s\": %.3f}\n",
        json_array(prompt).c_str(), json_array(out).c_str(), json_string(text).c_str(),
        hex.c_str(), load_ms, prompt_ms, gen_ms, n_gen, tps);
    return std::fflush(stdout) == 0 ? 0 : fail("could not write to stdout");
}

}  // namespace

int main(int argc, char ** argv) {
    const Options o = parse_args(argc, argv);
    if (!o.verbose) {
        llama_log_set(quiet_log, nullptr);
    }
    llama_backend_init();
    const int status = run(o);  // frees the model, context and sampler on every path
    llama_backend_free();
    return status;
}
