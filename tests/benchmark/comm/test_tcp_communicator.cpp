// The TCP communicator's ranks as threads of one process, each with its own environment (what
// torchrun would give it), meeting through a real TCPStore on loopback.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "benchmark/comm/communicator.h"
#include "benchmark/comm/rank_environment.h"

namespace mrcnn::comm {
namespace {

using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

EnvLookup lookup(const Env& env) {
  return [env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// A port nobody listens on now (the store's; bound and released, as test harnesses do).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

Env torchrun_env(int rank, int world, int port) {
  return {{"RANK", std::to_string(rank)},       {"WORLD_SIZE", std::to_string(world)},
          {"LOCAL_RANK", std::to_string(rank)}, {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)}, {"TORCHELASTIC_RUN_ID", "test"}};
}

// Runs body(rank, communicator) on `world` threads, one rank each; rethrows the first failure.
void on_ranks(int world, const std::function<void(int, Communicator&)>& body) {
  const int port = free_port();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto c = make_communicator("tcp", {.collective_timeout_s = 60}, lookup(torchrun_env(r, world, port)));
        body(r, *c);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// Values of a rank, with no shared generator between the rank threads.
at::Tensor values_of(int rank, int64_t n, at::ScalarType dtype) {
  return (at::sin(at::arange(n, at::kDouble) * (rank + 1.37) + rank) * 1000).to(dtype);
}

TEST(RankEnvironment, ReadsTorchrunSrunAndHandSetVariables) {
  auto t = read_rank_environment(lookup({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                         {"MASTER_ADDR", "node1"}, {"MASTER_PORT", "29501"},
                                         {"TORCHELASTIC_RUN_ID", "x"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                         {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->launcher, "torchrun");
  EXPECT_EQ(t->rank, 3);
  EXPECT_EQ(t->world_size, 8);
  EXPECT_EQ(t->local_rank, 1);
  EXPECT_EQ(t->master_addr, "node1");
  EXPECT_EQ(t->master_port, 29501);
  EXPECT_TRUE(t->agent_store);
  EXPECT_EQ(t->attempt, 2);

  auto h = read_rank_environment(
      lookup({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(h);
  EXPECT_EQ(h->launcher, "environment");
  EXPECT_FALSE(h->local_rank);
  EXPECT_FALSE(h->agent_store);

  // srun: the step's variables; the store at MASTER_ADDR, on a port from the job id.
  const Env srun{{"SLURM_PROCID", "5"},    {"SLURM_STEP_NUM_TASKS", "16"}, {"SLURM_LOCALID", "1"},
                 {"SLURM_JOB_ID", "123456"}, {"MASTER_ADDR", "node1"}};
  auto s = read_rank_environment(lookup(srun));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->launcher, "srun");
  EXPECT_EQ(s->rank, 5);
  EXPECT_EQ(s->world_size, 16);
  EXPECT_EQ(s->master_addr, "node1");
  EXPECT_EQ(s->master_port, 20000 + 123456 % 20000);
  // Without MASTER_ADDR: how to set it in a Slurm job.
  Env no_addr = srun;
  no_addr.erase("MASTER_ADDR");
  try {
    read_rank_environment(lookup(no_addr));
    ADD_FAILURE() << "no error";
  } catch (const CommunicatorConfigError& e) {
    EXPECT_THAT(e.what(), HasSubstr("export MASTER_ADDR=\"$(scontrol show hostnames"));
  }
  // A batch script's own shell (SLURM_PROCID without a step's task count) is no rank.
  EXPECT_FALSE(read_rank_environment(lookup({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "16"}})));
  EXPECT_FALSE(read_rank_environment(lookup({})));
}

TEST(RankEnvironment, MalformedVariablesAreNamed) {
  auto error_of = [](const Env& env) {
    try {
      read_rank_environment(lookup(env));
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const Env base{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& k, const std::string& v) {
    Env e = base;
    if (v.empty()) e.erase(k);
    else e[k] = v;
    return e;
  };
  EXPECT_THAT(error_of(with("RANK", "x")), HasSubstr("RANK=x: expected a whole number from 0 to 1"));
  EXPECT_THAT(error_of(with("RANK", "2")), HasSubstr("RANK=2"));
  EXPECT_THAT(error_of(with("WORLD_SIZE", "0")), HasSubstr("WORLD_SIZE=0"));
  EXPECT_THAT(error_of(with("MASTER_PORT", "70000")), HasSubstr("MASTER_PORT=70000"));
  EXPECT_THAT(error_of(with("MASTER_ADDR", "")), HasSubstr("MASTER_ADDR is not set"));
  EXPECT_THAT(error_of(with("WORLD_SIZE", "")), HasSubstr("WORLD_SIZE is not set"));
  EXPECT_TRUE(started_by_mpi(lookup({{"OMPI_COMM_WORLD_SIZE", "2"}})));
  EXPECT_TRUE(started_by_mpi(lookup({{"PMIX_RANK", "0"}})));
  EXPECT_FALSE(started_by_mpi(lookup(base)));
}

TEST(TcpCommunicator, ThreeRanksSumGatherAndBroadcastExactly) {
  const std::vector<int64_t> sizes{0, 1, 2, 7, 100003};  // fewer elements than ranks, and ragged chunks
  std::vector<std::vector<at::Tensor>> results(3);
  on_ranks(3, [&](int rank, Communicator& c) {
    EXPECT_EQ(c.backend(), "tcp");
    EXPECT_EQ(c.rank(), rank);
    EXPECT_EQ(c.world_size(), 3);
    EXPECT_EQ(c.local_rank(), rank);  // one host
    EXPECT_EQ(c.local_size(), 3);
    std::vector<at::Tensor> ts;
    for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt})
      for (int64_t n : sizes) ts.push_back(values_of(rank, n, dtype));
    c.allreduce_sum(ts, /*bucket_bytes=*/64 << 10);  // several buckets
    results[static_cast<size_t>(rank)] = ts;

    // Byte gathers: ragged sizes, an empty buffer, in rank order.
    const std::string mine = rank == 1 ? "" : std::string(static_cast<size_t>(1000 * rank + 3), char('a' + rank));
    const auto all = c.allgather_bytes(mine);
    ASSERT_EQ(all.size(), 3u);
    for (int r = 0; r < 3; ++r)
      EXPECT_EQ(all[static_cast<size_t>(r)], r == 1 ? "" : std::string(static_cast<size_t>(1000 * r + 3), char('a' + r)));
    const auto gathered = c.gather_bytes(mine, 2);
    EXPECT_EQ(gathered.size(), rank == 2 ? 3u : 0u);

    // Broadcast from rank 1 of more than one 4 MiB piece, and a double tensor.
    std::vector<at::Tensor> b{values_of(rank, (9 << 20) / 4 + 5, at::kFloat), values_of(rank, 3, at::kDouble)};
    c.broadcast(b, 1);
    EXPECT_TRUE(at::equal(b[0], values_of(1, (9 << 20) / 4 + 5, at::kFloat)));
    EXPECT_TRUE(at::equal(b[1], values_of(1, 3, at::kDouble)));
    c.barrier();
  });
  size_t i = 0;
  for (auto dtype : {at::kFloat, at::kDouble, at::kLong, at::kInt})
    for (int64_t n : sizes) {
      const at::Tensor expected = values_of(0, n, dtype) + values_of(1, n, dtype) + values_of(2, n, dtype);
      EXPECT_TRUE(at::allclose(results[0][i], expected, 1e-5, 1e-3)) << dtype << " " << n;
      // Every rank holds the same bits (each chunk summed once, then copied).
      EXPECT_TRUE(at::equal(results[0][i], results[1][i]) && at::equal(results[1][i], results[2][i]))
          << dtype << " " << n;
      if (dtype == at::kLong || dtype == at::kInt) {
        EXPECT_TRUE(at::equal(results[0][i], expected));
      }
      ++i;
    }
}

TEST(TcpCommunicator, TwoRanksGiveMpisSumBitForBit) {
  std::vector<at::Tensor> out(2);
  on_ranks(2, [&](int rank, Communicator& c) {
    std::vector<at::Tensor> ts{values_of(rank, 12345, at::kFloat)};
    c.allreduce_mean(ts);
    out[static_cast<size_t>(rank)] = ts[0];
  });
  const at::Tensor expected = (values_of(0, 12345, at::kFloat) + values_of(1, 12345, at::kFloat)) / 2;
  EXPECT_TRUE(at::equal(out[0], expected));
  EXPECT_TRUE(at::equal(out[1], expected));
}

TEST(TcpCommunicator, APeerThatEndsIsNamedByTheNextCollective) {
  const int port = free_port();
  std::string error;
  std::thread quitter([&] {
    auto c = make_communicator("tcp", {.collective_timeout_s = 30}, lookup(torchrun_env(1, 2, port)));
    c->barrier();
  });  // rank 1 leaves after the barrier: its sockets close (a timeout, not a hang, if unnoticed)
  auto c = make_communicator("tcp", {.collective_timeout_s = 30}, lookup(torchrun_env(0, 2, port)));
  c->barrier();
  quitter.join();
  std::vector<at::Tensor> ts{at::ones({1000})};
  try {
    c->allreduce_sum(ts);
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  EXPECT_THAT(error, HasSubstr("rank 0 ("));
  EXPECT_THAT(error, HasSubstr("lost the connection to rank 1 ("));
  EXPECT_THAT(error, ::testing::ContainsRegex(R"(rank 1 \([^,]+, [0-9]+\.[0-9]+\.[0-9]+\.[0-9]+:[0-9]+\))"));
}

TEST(TcpCommunicator, APeerThatHangsIsNamedAfterTheCollectiveTimeout) {
  const int port = free_port();
  std::string error;
  std::thread sleeper([&] {
    auto c = make_communicator("tcp", {.collective_timeout_s = 1}, lookup(torchrun_env(1, 2, port)));
    c->barrier();
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // misses rank 0's all-reduce
  });
  auto c = make_communicator("tcp", {.collective_timeout_s = 1}, lookup(torchrun_env(0, 2, port)));
  c->barrier();
  std::vector<at::Tensor> ts{at::ones({1000})};
  const auto start = std::chrono::steady_clock::now();
  try {
    c->allreduce_sum(ts);
  } catch (const std::runtime_error& e) {
    error = e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sleeper.join();
  EXPECT_THAT(error, HasSubstr("no data moved from rank 1 ("));
  EXPECT_THAT(error, HasSubstr("for 1 s in the all-reduce: it is dead or hung"));
  EXPECT_GE(waited, 0.9);
  EXPECT_LT(waited, 2.0);
}

TEST(TcpCommunicator, WithoutRanksOrWithALaunchersDisagreeingLocalRankItRefuses) {
  try {
    make_communicator("tcp", {}, lookup({}));
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT"));
  }
  // "auto" without any launcher's variables is the one-process communicator.
  EXPECT_EQ(make_communicator("auto", {}, lookup({}))->backend(), "local");
  EXPECT_EQ(make_communicator("auto", {}, lookup(torchrun_env(0, 1, free_port())))->backend(), "tcp");

  // LOCAL_RANK 1 and 0 for ranks 0 and 1 of one host: device choice would differ from the
  // launcher's.
  const int port = free_port();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      Env env = torchrun_env(r, 2, port);
      env["LOCAL_RANK"] = std::to_string(1 - r);
      try {
        make_communicator("tcp", {.collective_timeout_s = 30}, lookup(env));
      } catch (const std::runtime_error& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_THAT(errors[0], HasSubstr("torchrun numbers this rank 1 on its node"));
  EXPECT_THAT(errors[1], HasSubstr("torchrun numbers this rank 0 on its node"));
}

}  // namespace
}  // namespace mrcnn::comm
