// Chat renders on native threads (llama_cy._chat.ChatRenderPool).
//
// A render (common_chat_templates_apply) takes about a millisecond, most of it in the
// template analysis common repeats for every request. On a Python worker thread it
// first waits for the GIL to start and then for the event loop to take the result:
// milliseconds each while other requests generate. These threads never touch Python:
// a finished render is queued here and one byte on a pipe wakes the loop, which
// collects every finished render at once.
#pragma once

#include "_chat_shim.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifndef _WIN32
#include <unistd.h>
#endif

namespace lcy {

// One finished render: templates_apply's JSON, or the message of what it threw.
struct render_done {
    uint64_t ticket;
    bool ok;
    std::string out;
};

class render_pool {
  public:
    // `wake_fd`: the write end of a non-blocking pipe, written when a render finishes
    // while none waits to be collected.
    render_pool(int n_threads, int wake_fd) : wake_fd_(wake_fd) {
#ifdef _WIN32
        (void) n_threads;
        throw std::runtime_error("chat renders on native threads need a POSIX pipe");
#else
        for (int i = 0; i < n_threads; ++i) {
            threads_.emplace_back([this] { work(); });
        }
#endif
    }

    // Drops the renders not started and joins the threads after those in progress
    // (their templates are still alive: the caller keeps them until it is gone).
    ~render_pool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
            queue_.clear();
        }
        wake_.notify_all();
        for (auto & t : threads_) {
            t.join();
        }
    }

    render_pool(const render_pool &) = delete;
    render_pool & operator=(const render_pool &) = delete;

    void submit(uint64_t ticket, const common_chat_templates * tmpls, std::string request) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            queue_.push_back({ ticket, tmpls, std::move(request) });
        }
        wake_.notify_one();
    }

    // The renders finished since the last call.
    std::vector<render_done> collect() {
        std::lock_guard<std::mutex> lock(mutex_);
        return std::exchange(done_, {});
    }

  private:
    struct job {
        uint64_t ticket;
        const common_chat_templates * tmpls;
        std::string request;
    };

    void work() {
        for (;;) {
            job j;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) {
                    return;
                }
                j = std::move(queue_.front());
                queue_.pop_front();
            }
            render_done d{ j.ticket, true, {} };
            try {
                d.out = templates_apply(j.tmpls, j.request);
            } catch (const std::exception & e) {
                d.ok  = false;
                d.out = e.what();
            } catch (...) {
                d.ok  = false;
                d.out = "the chat template could not be rendered";
            }
            bool first;
            {
                std::lock_guard<std::mutex> lock(mutex_);
                first = done_.empty();
                done_.push_back(std::move(d));
            }
            // One byte per batch: the reader empties the pipe before it collects, so a
            // render finished after that collect writes again (never a lost wake-up).
            if (first) {
#ifndef _WIN32
                const char byte = 1;
                (void) !write(wake_fd_, &byte, 1);
#endif
            }
        }
    }

    int                        wake_fd_;
    std::mutex                 mutex_;
    std::condition_variable    wake_;
    std::deque<job>            queue_;
    std::vector<render_done>   done_;
    std::vector<std::thread>   threads_;
    bool                       stop_ = false;
};

}  // namespace lcy
