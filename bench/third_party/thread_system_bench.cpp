// SPDX-License-Identifier: MIT
// tp_bench's "single submit" case on Thread System (github.com/kcenon/thread_system):
// N empty jobs submitted one by one to a pool of W workers; jobs/s from the first
// submit to the last job done, and the submit call's latency p50/p99. Built and run by
// bench/thread_system.sh, which prints it next to tp_bench in alternating rounds.
//
//   thread_system_bench [TASKS (1000000)] [WORKERS (2)]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include <time.h>

#include <kcenon/thread/core/callback_job.h>
#include <kcenon/thread/core/thread_pool.h>
#include <kcenon/thread/core/thread_worker.h>
#include <kcenon/thread/interfaces/thread_context.h>

using namespace kcenon::thread;

static uint64_t now_ns()
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double pct(const std::vector<uint64_t> &v, double p)
{
	size_t rank = (size_t)((p / 100.0) * (double)v.size() + 0.999999);

	return v.empty() ? 0.0 : (double)v[rank ? rank - 1 : 0];
}

int main(int argc, char **argv)
{
	unsigned long tasks = argc > 1 ? strtoul(argv[1], nullptr, 10) : 1000000;
	unsigned workers = argc > 2 ? (unsigned)strtoul(argv[2], nullptr, 10) : 2;
	std::atomic<unsigned long> done{0};
	std::vector<uint64_t> lat(tasks);
	thread_context context;
	auto pool = std::make_shared<thread_pool>("bench", context);
	std::vector<std::unique_ptr<thread_worker>> ws;

	if (!tasks || !workers) {
		fprintf(stderr, "usage: thread_system_bench [TASKS >= 1] [WORKERS >= 1]\n");
		return 2;
	}
	for (unsigned i = 0; i < workers; i++)
		ws.push_back(std::make_unique<thread_worker>(false, context));
	if (pool->enqueue_batch(std::move(ws)).is_err() || pool->start().is_err()) {
		fprintf(stderr, "thread_system_bench: cannot start the pool\n");
		return 1;
	}
	uint64_t t0 = now_ns();
	for (unsigned long i = 0; i < tasks; i++) {
		auto job = std::make_unique<callback_job>([&done]() -> kcenon::common::VoidResult {
			done.fetch_add(1, std::memory_order_relaxed);
			return kcenon::common::ok();
		});
		uint64_t s = now_ns();

		if (pool->enqueue(std::move(job)).is_err()) {
			fprintf(stderr, "thread_system_bench: enqueue failed\n");
			return 1;
		}
		lat[i] = now_ns() - s;
	}
	while (done.load(std::memory_order_relaxed) < tasks) // drained: no CPU taken from workers
		std::this_thread::sleep_for(std::chrono::microseconds(50));
	uint64_t t_end = now_ns();
	pool->stop();
	std::sort(lat.begin(), lat.end());
	printf("{\"pool\": \"thread_system\", \"workers\": %u, \"submit\": \"single\", \"tasks\": %lu, "
	       "\"jobs_per_s\": %.0f, \"submit_p50_ns\": %.0f, \"submit_p99_ns\": %.0f}\n",
	       workers, tasks, (double)tasks * 1e9 / (double)(t_end - t0), pct(lat, 50), pct(lat, 99));
	return 0;
}
