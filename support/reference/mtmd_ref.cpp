// mtmd_ref: llama-mtmd-cli's evaluation of one media prompt, with its numbers written out.
//
// It makes the calls llama-mtmd-cli makes (tools/mtmd/mtmd-cli.cpp: mtmd_init_from_file,
// mtmd_helper_bitmap_init_from_file, mtmd_tokenize, then mtmd-helper's chunk evaluation,
// then greedy decoding), against the package's own libraries, and writes what the CLI
// keeps to itself: each media chunk's embeddings and the logits after the prompt. Tests
// compare llama_cy's MtmdContext and Llama with these; the benchmark times the same work.
// $LLAMA_CY_N_GPU_LAYERS (the tests' offload switch) offloads the model and the projector.
// A MEDIA file that is a video is read as llama-server reads one (ffmpeg), at
// $MTMD_REF_VIDEO_FPS frames a second with a timestamp every $MTMD_REF_VIDEO_TS_MS
// (llama-server's --video-fps, --video-timestamp-interval; default: theirs).
//
// Usage:
//   mtmd_ref LIB_DIR MODEL MMPROJ PROMPT N_PREDICT OUT_PREFIX THREADS WARMUP MEDIA...
// PROMPT holds one media marker per MEDIA file. WARMUP 1 evaluates the prompt once, clears
// the KV cache and evaluates it again, timing the second pass (a warm process). Writes OUT_PREFIX.embd.N (float32, one
// file per media chunk) and OUT_PREFIX.logits (float32), and prints one JSON line:
// {"n_tokens": .., "tokens": [greedy ids], "encode_ms": .., "prefill_ms": ..,
//  "chunks": [[type, n_tokens], ..]} (type: 0 text, 1 image, 2 audio).

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

static double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

static void write_floats(const std::string & path, const float * data, size_t n) {
    FILE * f = std::fopen(path.c_str(), "wb");
    if (!f || std::fwrite(data, sizeof(float), n, f) != n) {
        std::fprintf(stderr, "mtmd_ref: cannot write %s\n", path.c_str());
        std::exit(1);
    }
    std::fclose(f);
}

int main(int argc, char ** argv) {
    if (argc < 10) {
        std::fprintf(stderr, "usage: mtmd_ref LIB_DIR MODEL MMPROJ PROMPT N_PREDICT OUT_PREFIX THREADS WARMUP MEDIA...\n");
        return 2;
    }
    const std::string prompt = argv[4];
    const int n_predict = std::atoi(argv[5]);
    const std::string out = argv[6];
    const int threads = std::atoi(argv[7]);
    const bool warmup = std::atoi(argv[8]) != 0;

    ggml_backend_load_all_from_path(argv[1]);
    llama_backend_init();
    // The tests' offload switch: the same layers on the same device as llama_cy's side.
    const char * ngl = std::getenv("LLAMA_CY_N_GPU_LAYERS");
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = ngl ? std::atoi(ngl) : 0;
    llama_model * model = llama_model_load_from_file(argv[2], mp);
    if (!model) { std::fprintf(stderr, "mtmd_ref: model load failed\n"); return 1; }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    llama_context * lctx = llama_init_from_model(model, cp);

    mtmd_context_params mparams = mtmd_context_params_default();
    mparams.use_gpu = mp.n_gpu_layers != 0;
    mparams.n_threads = threads;
    mparams.print_timings = false;
    mtmd_context * mctx = mtmd_init_from_file(argv[3], model, mparams);
    if (!mctx) { std::fprintf(stderr, "mtmd_ref: projector load failed\n"); return 1; }

    mtmd_helper_init_opt opt = mtmd_helper_init_opt_default();
    if (const char * fps = std::getenv("MTMD_REF_VIDEO_FPS")) opt.video_params.fps_target = std::atof(fps);
    if (const char * ts = std::getenv("MTMD_REF_VIDEO_TS_MS")) opt.video_params.timestamp_interval_ms = std::atoll(ts);
    std::vector<mtmd_bitmap *> bitmaps;
    std::vector<mtmd_helper_video *> videos;  // read by mtmd_tokenize, freed after it
    for (int i = 9; i < argc; i++) {
        mtmd_helper_bitmap_wrapper w = mtmd_helper_bitmap_init_from_file(mctx, argv[i], false, opt);
        if (!w.bitmap) { std::fprintf(stderr, "mtmd_ref: cannot load %s\n", argv[i]); return 1; }
        bitmaps.push_back(w.bitmap);
        if (w.video_ctx) videos.push_back(w.video_ctx);
    }
    mtmd_input_text text = {prompt.c_str(), prompt.size(), true, true};
    mtmd_input_chunks * chunks = mtmd_input_chunks_init();
    if (mtmd_tokenize(mctx, chunks, &text, (const mtmd_bitmap **) bitmaps.data(), bitmaps.size()) != 0) {
        std::fprintf(stderr, "mtmd_ref: tokenize failed\n");
        return 1;
    }
    for (auto * v : videos) mtmd_helper_video_free(v);
    std::string chunk_list;
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); i++) {
        const mtmd_input_chunk * c = mtmd_input_chunks_get(chunks, i);
        chunk_list += (i ? ",[" : "[") + std::to_string((int) mtmd_input_chunk_get_type(c)) + ","
                    + std::to_string(mtmd_input_chunk_get_n_tokens(c)) + "]";
    }

    // mtmd_helper_eval_chunks, chunk by chunk, so that the encode can be timed and its
    // output written before the decode.
    llama_pos n_past = 0;
    double encode_ms = 0, prefill_ms = 0;
    const size_t n_chunks = mtmd_input_chunks_size(chunks);
    int n_media = 0;
    const int n_embd = llama_model_n_embd_inp(model);
    for (int pass = warmup ? 0 : 1; pass < 2; pass++) {
    if (pass == 1 && warmup) {
        llama_memory_clear(llama_get_memory(lctx), true);
        n_past = 0;
        encode_ms = prefill_ms = 0;
        n_media = 0;
    }
    for (size_t i = 0; i < n_chunks; i++) {
        const mtmd_input_chunk * chunk = mtmd_input_chunks_get(chunks, i);
        const bool last = i + 1 == n_chunks;
        const double t0 = now_ms();
        if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
            if (mtmd_helper_eval_chunk_single(mctx, lctx, chunk, n_past, 0, cp.n_batch, last, &n_past) != 0) {
                std::fprintf(stderr, "mtmd_ref: text decode failed\n");
                return 1;
            }
            prefill_ms += now_ms() - t0;
            continue;
        }
        if (mtmd_encode_chunk(mctx, chunk) != 0) { std::fprintf(stderr, "mtmd_ref: encode failed\n"); return 1; }
        float * embd = mtmd_get_output_embd(mctx);
        const double t1 = now_ms();
        encode_ms += t1 - t0;
        write_floats(out + ".embd." + std::to_string(n_media++), embd, mtmd_input_chunk_get_n_tokens(chunk) * (size_t) n_embd);
        if (mtmd_helper_decode_image_chunk(mctx, lctx, chunk, embd, n_past, 0, cp.n_batch, &n_past, nullptr, nullptr) != 0) {
            std::fprintf(stderr, "mtmd_ref: media decode failed\n");
            return 1;
        }
        prefill_ms += now_ms() - t1;
    }
    }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    write_floats(out + ".logits", llama_get_logits_ith(lctx, -1), n_vocab);

    // Greedy, as llama-mtmd-cli with --temp 0.
    llama_sampler * smpl = llama_sampler_init_greedy();
    std::string toks;
    for (int i = 0; i < n_predict; i++) {
        llama_token t = llama_sampler_sample(smpl, lctx, -1);
        if (llama_vocab_is_eog(vocab, t)) break;
        toks += (toks.empty() ? "" : ",") + std::to_string(t);
        llama_batch b = llama_batch_get_one(&t, 1);
        if (llama_decode(lctx, b) != 0) { std::fprintf(stderr, "mtmd_ref: decode failed\n"); return 1; }
        n_past++;
    }
    std::printf("{\"n_tokens\": %d, \"tokens\": [%s], \"encode_ms\": %.3f, \"prefill_ms\": %.3f, \"chunks\": [%s]}\n",
                (int) n_past, toks.c_str(), encode_ms, prefill_ms, chunk_list.c_str());
    llama_sampler_free(smpl);
    mtmd_input_chunks_free(chunks);
    for (auto * b : bitmaps) mtmd_bitmap_free(b);
    mtmd_free(mctx);
    llama_free(lctx);
    llama_model_free(model);
    return 0;
}
