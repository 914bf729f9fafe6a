// The boundary between llama_cy._chat and llama.cpp's common chat engine (libllama-common).
//
// Everything crosses as JSON text, so the Cython side declares a handful of functions on
// std::string and never sees common's C++ types. Each function throws on bad input; the
// Cython declarations carry `except +`, so every throw becomes a Python exception.
#pragma once

#include "chat.h"
#include "common.h"
#include "json-schema-to-grammar.h"
#include "log.h"
#include "reasoning-budget.h"

#include <climits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace lcy {

using json = common_json;

// common's own log (a thread writing to stderr, apart from llama.cpp's log callback):
// messages up to `level` (LOG_LEVEL_*; 0 silences its warnings and errors, which reach
// Python as exceptions anyway).
inline void log_verbosity(int level) { common_log_set_verbosity_thold(level); }

// The model's templates (its own, or `source` when given: Jinja text, or "chatml").
inline common_chat_templates * templates_init(const llama_model * model, const std::string & source) {
    return common_chat_templates_init(model, source).release();
}

inline void templates_free(common_chat_templates * tmpls) { common_chat_templates_free(tmpls); }

inline std::string templates_source(const common_chat_templates * tmpls, const std::string & variant) {
    return common_chat_templates_source(tmpls, variant);
}

inline std::string templates_caps(const common_chat_templates * tmpls) {
    json out = json::object();
    for (const auto & [name, value] : common_chat_templates_get_caps(tmpls)) {
        out[name] = value;
    }
    out["supports_enable_thinking"] = common_chat_templates_support_enable_thinking(tmpls);
    return out.dump();
}

// One render, as llama-server's oaicompat_chat_params_parse builds the inputs. `request`
// holds messages, tools, tool_choice ("auto"/"required"/"none"), parallel_tool_calls,
// json_schema, grammar, add_generation_prompt, continue_final_message, use_jinja,
// reasoning_format (llama-server's names), enable_thinking and chat_template_kwargs
// (an object of values). The reply holds common_chat_params' fields.
inline std::string templates_apply(const common_chat_templates * tmpls, const std::string & request) {
    const json req = json::parse(request);
    common_chat_templates_inputs in;
    in.messages = common_chat_msgs_parse_oaicompat(req.at("messages"));
    in.tools = common_chat_tools_parse_oaicompat(req.value("tools", json()));
    in.tool_choice = common_chat_tool_choice_parse_oaicompat(req.value("tool_choice", std::string("auto")));
    in.parallel_tool_calls = req.value("parallel_tool_calls", false);
    const json schema = req.value("json_schema", json());
    in.json_schema = schema.is_null() ? "" : schema.dump();
    in.grammar = req.value("grammar", std::string());
    in.add_generation_prompt = req.value("add_generation_prompt", true);
    if (req.contains("continue_final_message")) {
        in.continue_final_message = common_chat_continuation_parse(req.at("continue_final_message"));
    }
    in.use_jinja = req.value("use_jinja", true);
    in.reasoning_format = common_reasoning_format_from_name(req.value("reasoning_format", std::string("none")));
    in.enable_thinking = req.value("enable_thinking", true);
    in.force_pure_content = req.value("force_pure_content", false);
    const json kwargs = req.value("chat_template_kwargs", json::object());
    for (const auto & [key, value] : kwargs.items()) {
        in.chat_template_kwargs[key] = value.dump();
    }

    const common_chat_params p = common_chat_templates_apply(tmpls, in);
    json out = json::object();
    out["format"] = static_cast<int>(p.format);
    out["format_name"] = common_chat_format_name(p.format);
    out["prompt"] = p.prompt;
    out["grammar"] = p.grammar;
    out["grammar_lazy"] = p.grammar_lazy;
    json triggers = json::array();
    for (const auto & t : p.grammar_triggers) {
        json item = json::object();
        item["type"] = static_cast<int>(t.type);
        item["value"] = t.value;
        // How common_sampler_init hands this trigger to the lazy grammar, as a pattern.
        item["pattern"] = t.type == COMMON_GRAMMAR_TRIGGER_TYPE_WORD ? regex_escape(t.value) : t.value;
        triggers.push_back(item);
    }
    out["grammar_triggers"] = triggers;
    out["preserved_tokens"] = p.preserved_tokens;
    out["additional_stops"] = p.additional_stops;
    out["generation_prompt"] = p.generation_prompt;
    out["parser"] = p.parser;
    out["supports_thinking"] = p.supports_thinking;
    out["thinking_start_tag"] = p.thinking_start_tag;
    out["thinking_end_tags"] = p.thinking_end_tags;
    out["message_delimiters"] = p.message_delimiters.to_json();
    return out.dump();
}

inline std::string tool_call_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string id(32, ' ');
    for (auto & ch : id) {
        ch = alnum[rng() % (sizeof(alnum) - 1)];
    }
    return id;
}

inline json msg_json(const common_chat_msg & msg) {
    json out = json::object();
    out["role"] = msg.role.empty() ? std::string("assistant") : msg.role;
    out["content"] = msg.content;
    out["reasoning_content"] = msg.reasoning_content;
    json calls = json::array();
    for (const auto & call : msg.tool_calls) {
        json item = json::object();
        item["name"] = call.name;
        item["arguments"] = call.arguments;
        item["id"] = call.id;
        calls.push_back(item);
    }
    out["tool_calls"] = calls;
    return out;
}

// One step of a streamed reply (common_chat_msg_diff): index -1 unless it is a tool call's.
struct delta {
    std::string content;
    std::string reasoning_content;
    int64_t index;
    std::string name;
    std::string arguments;
    std::string id;
};

// A parser for one generation: common_chat_parse over the whole text so far, and the
// deltas since the last call (llama-server's task_result_state::update_chat_msg).
class parser {
  public:
    // `config` holds format, parser (the PEG arena text), generation_prompt,
    // reasoning_format, reasoning_in_content and parse_tool_calls.
    explicit parser(const std::string & config) {
        const json c = json::parse(config);
        params_.format = static_cast<common_chat_format>(c.value("format", 0));
        if (params_.format < 0 || params_.format >= COMMON_CHAT_FORMAT_COUNT) {
            throw std::invalid_argument("unknown chat format");
        }
        params_.reasoning_format = common_reasoning_format_from_name(c.value("reasoning_format", std::string("none")));
        params_.reasoning_in_content = c.value("reasoning_in_content", false);
        params_.generation_prompt = c.value("generation_prompt", std::string());
        params_.parse_tool_calls = c.value("parse_tool_calls", true);
        const std::string arena = c.value("parser", std::string());
        if (!arena.empty()) {
            params_.parser.load(arena);
        }
    }

    std::string parse(const std::string & text, bool is_partial) {
        common_chat_msg msg = common_chat_parse(text, is_partial, params_);
        msg.set_tool_call_ids(ids_, tool_call_id);
        return msg_json(msg).dump();
    }

    // The deltas from the previous call's message to this text's, as llama-server's
    // task_result_state::update_chat_msg: an empty parse changes nothing. A partial text
    // that does not parse yet gives no deltas (more text may mend it); a final one
    // throws. The message itself stays here (message()): a streamed token should not
    // pay for the whole reply's JSON.
    std::vector<delta> update(const std::string & text, bool is_partial) {
        std::vector<delta> out;
        common_chat_msg msg;
        try {
            msg = common_chat_parse(text, is_partial, params_);
        } catch (const std::exception &) {
            if (!is_partial) {
                throw;
            }
        }
        if (!msg.empty()) {
            msg.set_tool_call_ids(ids_, tool_call_id);
            for (auto & d : common_chat_msg_diff::compute_diffs(prev_, msg)) {
                const bool call = d.tool_call_index != std::string::npos;
                out.push_back({std::move(d.content_delta), std::move(d.reasoning_content_delta),
                               call ? static_cast<int64_t>(d.tool_call_index) : -1,
                               std::move(d.tool_call_delta.name), std::move(d.tool_call_delta.arguments),
                               std::move(d.tool_call_delta.id)});
            }
            prev_ = std::move(msg);
        }
        return out;
    }

    // The message of the last update, as JSON.
    std::string message() const { return msg_json(prev_).dump(); }

  private:
    common_chat_parser_params params_;
    common_chat_msg prev_;
    std::vector<std::string> ids_;
};

inline std::string schema_to_grammar(const std::string & schema) {
    return json_schema_to_grammar(json::parse(schema));
}

// common's reasoning-budget sampler over token sequences already tokenized by the caller.
inline llama_sampler * reasoning_budget(const llama_vocab * vocab,
                                        const std::vector<llama_tokens> & start,
                                        const std::vector<llama_tokens> & end,
                                        const llama_tokens & forced, int32_t budget) {
    return common_reasoning_budget_init(vocab, start, end, forced, budget < 0 ? INT_MAX : budget);
}

}  // namespace lcy
