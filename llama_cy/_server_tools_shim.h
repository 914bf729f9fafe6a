// llama-server's /tools, run by llama_cy's server: its built-in agent tools
// (server-tools.cpp) and its MCP client (server-mcp.cpp), from llama.cpp's own
// server-context library. Requests and answers cross as strings, as they cross HTTP in
// llama-server, so Cython never sees the server's C++ types.
#pragma once

#include "common.h"
#include "server-http.h"
#include "server-mcp.h"
#include "server-tools.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lcy {

// One request to a /tools handler. It owns the request the handler reads (a streaming
// tool's worker holds it by reference) and the answer; deleting it stops and joins the
// worker of a stream (server_tools_res's destructor).
struct ToolCall {
    std::atomic<bool>     stopped{ false };
    std::function<bool()> should_stop;
    server_http_req       req;
    server_http_res_ptr   res;

    ToolCall(std::map<std::string, std::string> headers, std::string body) :
        should_stop([this] { return stopped.load(); }),
        req{ {}, std::move(headers), "/tools", "", std::move(body), {}, should_stop } {}
};

// What llama-server sets up at start: the MCP servers (spawned and asked for their
// tools), then the tools. start() throws where llama-server would refuse to start.
struct Tools {
    server_mcp   mcp;
    server_tools tools;
    bool         active = false;

    void start(const std::vector<std::string> & enabled, const std::string & runtime,
               const std::string & mcp_config, const std::string & mcp_json) {
        common_params params;
        params.mcp_servers_config = mcp_config;
        params.mcp_servers_json   = mcp_json;
        mcp.start(params);
        if (!enabled.empty() || !mcp.empty()) {
            tools.setup(enabled, mcp, runtime);
            active = true;
        }
    }

    // llama-server's shutdown of its MCP servers: a call in flight returns at once.
    void shutdown() { mcp.shutdown(); }

    ~Tools() { mcp.shutdown(); }
};

inline ToolCall * tools_get(Tools * t) {
    auto call = std::make_unique<ToolCall>(std::map<std::string, std::string>{}, std::string());
    call->res = t->tools.handle_get(call->req);
    return call.release();
}

inline ToolCall * tools_post(Tools * t, const std::map<std::string, std::string> & headers,
                             const std::string & body) {
    auto call = std::make_unique<ToolCall>(headers, body);
    call->res = t->tools.handle_post(call->req);
    return call.release();
}

inline int call_status(const ToolCall * c) {
    return c->res->status;
}

inline std::string call_content_type(const ToolCall * c) {
    return c->res->content_type;
}

inline std::string call_data(const ToolCall * c) {
    return c->res->data;
}

inline bool call_is_stream(const ToolCall * c) {
    return c->res->is_stream();
}

// The next chunk of a stream into `out`; false after the last one.
inline bool call_next(ToolCall * c, std::string & out) {
    return c->res->next(out);
}

inline void call_free(ToolCall * c) {
    c->stopped = true;
    delete c;
}

}  // namespace lcy
