#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>

#include "benchmark/config/system_config.h"
#include "logging/closed_division.h"
#include "model/options_json.h"

namespace mrcnn::config {
namespace {

const std::string kSystems = std::string(MRCNN_SOURCE_DIR) + "/systems/";

TEST(SystemConfig, EveryShippedSystemLoadsAndClosedOnesFollowTheRules) {
  int closed = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSystems)) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    const SystemConfig c = load_system_config(e.path().string());
    EXPECT_EQ(c.name, e.path().stem().string());
    EXPECT_EQ(c.hp.global_batch_size % c.launch.world_size(), 0);
    if (c.submission.division == "closed") {
      ++closed;
      EXPECT_TRUE(closed_division_violations(c).empty());
      EXPECT_EQ(c.model_section.num_classes, 81);
      EXPECT_EQ(model_options(c).rpn.post_nms_top_n_train, c.hp.num_image_candidates);
    }
  }
  EXPECT_GE(closed, 4);
}

TEST(SystemConfig, OverridesReachTheStructs) {
  const SystemConfig c = load_system_config(kSystems + "cpu-dev.json", {"run.seed=42", "run.max_epochs=3",
                                                                         "run.precision=\"bf16\""});
  EXPECT_EQ(c.run.seed, 42);
  EXPECT_EQ(c.run.max_epochs, 3);
  EXPECT_EQ(c.run.precision, model::Precision::kBFloat16);
  EXPECT_EQ(model_options(c).precision, model::Precision::kBFloat16);  // one value, mapped in one place
  EXPECT_EQ(c.resolved["run"]["seed"], 42);
  EXPECT_EQ(c.launch.host_memory, "retain");  // the default
  EXPECT_EQ(load_system_config(kSystems + "cpu-dev.json", {"launch.host_memory=\"system\""}).launch.host_memory,
            "system");
}

// A file that extends another: written into a scratch folder beside a copy of its base.
struct ExtendsFixture {
  std::filesystem::path dir;
  ExtendsFixture() {
    dir = std::filesystem::temp_directory_path() / ("mrcnn-extends-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(kSystems + "aws-p3dn.24xlarge.json", dir / "base.json",
                               std::filesystem::copy_options::overwrite_existing);
  }
  ~ExtendsFixture() { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

TEST(SystemConfig, ExtendsAmendsItsBaseKeyByKey) {
  // Each EFA family's 2-node file and its one-node base.
  for (const std::string name : {"aws-p3dn.24xlarge", "aws-p5.48xlarge"}) {
    SCOPED_TRACE(name);
    const SystemConfig base = load_system_config(kSystems + name + ".json");
    const SystemConfig two = load_system_config(kSystems + name + "-2n.json");
    EXPECT_EQ(two.launch.nodes, 2);
    EXPECT_EQ(two.launch.world_size(), 16);
    EXPECT_EQ(two.hp.global_batch_size, 128);
    EXPECT_EQ(two.hp.base_lr, 0.16);                                  // the base's set for batch 128
    EXPECT_EQ(two.launch.threads_per_rank, base.launch.threads_per_rank);  // inherited
    EXPECT_EQ(two.launch.env.at("NCCL_SOCKET_IFNAME"), base.launch.env.at("NCCL_SOCKET_IFNAME"));  // objects merge
    EXPECT_EQ(two.launch.env.at("FI_PROVIDER"), "efa");                                           // key by key
    EXPECT_EQ(two.system_description["number_of_nodes"], "2");
    EXPECT_EQ(two.system_description["host_memory_capacity"], base.system_description["host_memory_capacity"]);
    EXPECT_FALSE(two.resolved.contains("extends"));  // config.json stands alone
    EXPECT_EQ(two.name, name + "-2n");
  }
  EXPECT_EQ(load_system_config(kSystems + "aws-p3dn.24xlarge-2n.json").launch.env.at("NCCL_SOCKET_IFNAME"), "ens5");

  ExtendsFixture f;
  // The error loading a file gives ("" when it loads).
  auto error = [](const std::string& path, const std::vector<std::string>& overrides = {}) -> std::string {
    try {
      load_system_config(path, overrides);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  // null removes a key; a bad inherited value is reported against the file that holds it.
  const std::string removed =
      f.write("a.json", R"({"extends": "base.json", "launch": {"env": {"NCCL_SOCKET_IFNAME": null}}})");
  EXPECT_FALSE(load_system_config(removed).launch.env.contains("NCCL_SOCKET_IFNAME"));
  const std::string own = f.write("bad_base.json", R"({"extends": "a.json", "run": {"max_epochs": 0}})");
  EXPECT_NE(error(own).find("bad_base.json: run.max_epochs"), std::string::npos) << error(own);
  EXPECT_NE(error(removed, {"launch.threads_per_rank=0"}).find("--set launch.threads_per_rank=0"), std::string::npos);
  const std::string inherits_bad = f.write("c.json", R"({"extends": "b2.json"})");
  f.write("b2.json", R"({"extends": "base.json", "data": {"loader_threads": -1}})");
  EXPECT_NE(error(inherits_bad).find("b2.json: data.loader_threads"), std::string::npos) << error(inherits_bad);
  // Three levels: a value the middle file only inherits is blamed on the file that holds it.
  f.write("base_bad.json", R"({"extends": "base.json", "run": {"eval_threads": 0}})");
  f.write("middle.json", R"({"extends": "base_bad.json", "launch": {"threads_per_rank": 3}})");
  const std::string top = f.write("top.json", R"({"extends": "middle.json", "data": {"loader_threads": 1}})");
  EXPECT_NE(error(top).find("base_bad.json: run.eval_threads"), std::string::npos) << error(top);
  const std::string loop = f.write("loop.json", R"({"extends": "loop2.json"})");
  f.write("loop2.json", R"({"extends": "loop.json"})");
  EXPECT_NE(error(loop).find("extends itself"), std::string::npos) << error(loop);
  const std::string device = f.write("dev.json", R"({"extends": "/dev/zero"})");
  EXPECT_NE(error(device).find("/dev/zero: is not a regular file"), std::string::npos) << error(device);
  const std::string missing = f.write("m.json", R"({"extends": "nowhere.json"})");
  EXPECT_NE(error(missing).find("nowhere.json: cannot open"), std::string::npos) << error(missing);
}

// The speed paths a GPU visit measured (benchmark/perf/gpu_profiles/h200-2026-11-28b): the mask
// head's RoI bucket on every AWS GPU file, the fused bottlenecks on the H100 files alone (sm_90, as
// the H200 that ran them; a V100 is sm_70), inherited by every multi-node file.
TEST(SystemConfig, AwsSystemsCarryTheMeasuredSpeedPaths) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSystems)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("aws-")) continue;
    const SystemConfig c = load_system_config(entry.path().string());
    SCOPED_TRACE(name);
    ++files;
    EXPECT_EQ(c.model_section.mask_head.roi_bucket, 64);
    EXPECT_EQ(c.model_section.backbone.fused_conv_relu, name.starts_with("aws-p5.")) << name;
    EXPECT_FALSE(c.run.deterministic);
    // NVIDIA's two shapes, warmed up before run_start.
    EXPECT_TRUE(c.run.warm_up);
    EXPECT_EQ(c.data.pad_to_shapes.size(), 2u);
  }
  EXPECT_EQ(files, 15);
  for (const char* name : {"cpu-dev.json", "habana-gaudi-hls1.json", "habana-gaudi2-hls.json"}) {
    const SystemConfig c = load_system_config(kSystems + name);
    EXPECT_EQ(c.model_section.mask_head.roi_bucket, 0) << name;
    EXPECT_FALSE(c.model_section.backbone.fused_conv_relu) << name;
  }
}

// The p5 files: NVIDIA's DGX H100 recipe on one node; on every node count 1000 proposal candidates
// per image of a GPU's batch (the rule's "1000 * batches per chip"), where a multi-node file
// overrides the base's set for its batch size when its images per GPU differ.
TEST(SystemConfig, AwsP5KeepsNvidiasRecipeAndCandidatesPerImage) {
  const SystemConfig one = load_system_config(kSystems + "aws-p5.48xlarge.json");
  EXPECT_EQ(one.hp.global_batch_size, 96);
  EXPECT_EQ(one.images_per_rank(), 12);
  EXPECT_EQ(one.hp.base_lr, 0.12);
  EXPECT_EQ(one.hp.warmup_steps, 625);
  EXPECT_EQ(one.hp.warmup_factor, 0.000192);
  EXPECT_EQ(one.hp.decay_steps, (std::vector<int64_t>{12000, 16000}));
  EXPECT_EQ(one.launch.threads_per_rank, 12);  // 96 cores over 8 ranks
  const std::map<std::string, int64_t> images_per_gpu = {{"", 12}, {"-2n", 8}, {"-4n", 8}, {"-8n", 4}, {"-16n", 2}};
  for (const auto& [suffix, images] : images_per_gpu) {
    const SystemConfig c = load_system_config(kSystems + "aws-p5.48xlarge" + suffix + ".json");
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.images_per_rank(), images);
    EXPECT_EQ(c.hp.num_image_candidates, 1000 * images);
  }
}

std::string error_of(const std::vector<std::string>& overrides, const std::string& file = "cpu-dev.json") {
  try {
    load_system_config(kSystems + file, overrides);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SystemConfig, BadValuesAreOneClearError) {
  EXPECT_NE(error_of({"run.max_epoch=3"}).find("--set run.max_epoch=3: unknown key 'run.max_epoch'"), std::string::npos);
  EXPECT_NE(error_of({"run.max_steps_per_epoch=-1"}).find("run.max_steps_per_epoch: expected a value in [0, 1000000000], got -1"),
            std::string::npos);
  EXPECT_NE(error_of({"run.max_epochs=0"}).find("--set run.max_epochs=0: run.max_epochs: expected a value in [1, 100000], got 0"),
            std::string::npos);
  // An image size no codec accepts is refused by name, before any allocation (100000 px would
  // ask for 960 GB a sample).
  EXPECT_NE(error_of({"data.min_size=100000"}).find("--set data.min_size=100000: data.min_size: expected a value in [1, 16384], got 100000"),
            std::string::npos) << error_of({"data.min_size=100000"});
  EXPECT_NE(error_of({"data.max_size=100000"}).find("data.max_size: expected a value in [0, 16384]"), std::string::npos);
  EXPECT_NE(error_of({"data.annotation_source=\"binary\""}).find("data.annotation_source"), std::string::npos);
  // run.ops and the device names: every LibTorch device a comparison needs, native ops where they exist.
  EXPECT_NE(error_of({"run.ops=\"fast\""}).find("run.ops"), std::string::npos);
  for (const char* dev : {"cpu", "cuda", "cuda:1", "hpu", "hpu:0", "xpu", "xpu:3", "mps"})
    EXPECT_EQ(error_of({std::string("run.device=\"") + dev + "\"", "run.ops=\"portable\""}), "") << dev;
  for (const char* dev : {"tpu", "cuda:", "hpu:x", "gpu", "mps:0"})
    EXPECT_NE(error_of({std::string("run.device=\"") + dev + "\""}).find("run.device: expected \"cpu\""), std::string::npos)
        << dev;
  EXPECT_NE(error_of({"run.device=\"hpu\"", "run.ops=\"native\""})
                .find("run.ops: \"native\" kernels exist for the CPU and NVIDIA GPUs only; hpu needs \"portable\""),
            std::string::npos);
  EXPECT_EQ(error_of({"run.device=\"hpu\""}), "");  // auto: portable there
  EXPECT_NE(error_of({"launch.backend_library=\"libhabana_pytorch_plugin.so\""})
                .find("launch.backend_library: expected an absolute path"),
            std::string::npos);
  EXPECT_EQ(load_system_config(kSystems + "habana-gaudi2-hls.json", {}).run.ops, ops::Implementation::kPortable);
  EXPECT_NE(error_of({"run.max_epochs=\"ten\""}).find("run.max_epochs: expected an integer, got a string \"ten\""),
            std::string::npos);
  EXPECT_NE(error_of({"run.seed.x=1"}).find("--set run.seed.x=1: run.seed holds an integer"), std::string::npos);
  EXPECT_NE(error_of({"model.rpn.nms_thresh=0.6"}).find("--set model.rpn.nms_thresh=0.6: model.rpn.nms_thresh: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of({"run.precision=\"fp16\""}).find("fp16 (with loss scaling) is for CUDA devices"),
            std::string::npos);
  // Mixed precision on CUDA: fp16 (loss-scaled) and bf16 both validate.
  EXPECT_EQ(error_of({"run.precision=\"bf16\""}, "aws-p3.16xlarge.json"), "");
  EXPECT_EQ(error_of({"run.precision=\"fp16\""}, "aws-p3.16xlarge.json"), "");
  EXPECT_NE(error_of({"hyperparameters.global_batch_size=7"}).find("no hyperparameter set for global_batch_size 7"),
            std::string::npos);
  EXPECT_NE(error_of({"model.backbone.depth=19"}).find("depth"), std::string::npos);
  EXPECT_NE(error_of({"launch.ranks_per_node=3"}).find("not divisible"), std::string::npos);
  EXPECT_NE(error_of({"launch.communicator=\"nccl\""}).find("needs run.device \"cuda\""), std::string::npos);
  EXPECT_NE(error_of({"launch.communicator=\"gloo\""}).find("launch.communicator"), std::string::npos);
  // One named GPU serves one rank per node; eight ranks would share it.
  EXPECT_NE(error_of({"run.device=\"cuda:1\""}, "aws-p3.16xlarge.json")
                .find("run.device: \"cuda:1\" would put all 8 ranks of a node on one GPU"),
            std::string::npos)
      << error_of({"run.device=\"cuda:1\""}, "aws-p3.16xlarge.json");
  EXPECT_EQ(error_of({"run.device=\"cuda:1\""}), "");
  EXPECT_NE(error_of({"launch.host_memory=\"keep\""}).find("launch.host_memory"), std::string::npos);
  // CUDA graphs: a run setting, for CUDA devices, a shape count in [0, 1].
  EXPECT_NE(error_of({"run.cuda_graph_shapes=4"}).find("run.cuda_graph_shapes: CUDA graphs need run.device \"cuda\""),
            std::string::npos)
      << error_of({"run.cuda_graph_shapes=4"});
  EXPECT_NE(error_of({"run.cuda_graph_shapes=-1"}, "aws-p3.16xlarge.json").find("run.cuda_graph_shapes"), std::string::npos);
  EXPECT_NE(error_of({"model.cuda_graph_shapes=4"}, "aws-p3.16xlarge.json").find("set by run.cuda_graph_shapes"),
            std::string::npos);
  // The loss heads' streams: a model switch, for CUDA devices, a boolean.
  EXPECT_NE(error_of({"model.head_streams=true"}).find("model.head_streams: the loss heads' streams are CUDA streams"),
            std::string::npos)
      << error_of({"model.head_streams=true"});
  EXPECT_EQ(error_of({"model.head_streams=true"}, "aws-p3.16xlarge.json"), "");
  EXPECT_NE(error_of({"model.head_streams=2"}, "aws-p3.16xlarge.json").find("model.head_streams"), std::string::npos);
  // The fused convolutions: cuDNN's, over a frozen batch norm's bias.
  EXPECT_NE(error_of({"model.backbone.fused_conv_relu=true"}).find("model.backbone.fused_conv_relu: the fused convolutions are cuDNN's"),
            std::string::npos)
      << error_of({"model.backbone.fused_conv_relu=true"});
  EXPECT_EQ(error_of({"model.backbone.fused_conv_relu=true"}, "aws-p3.16xlarge.json"), "");
  EXPECT_NE(error_of({"model.backbone.fused_conv_relu=true", "model.backbone.norm=\"group_norm\""}, "aws-p3.16xlarge.json")
                .find("backbone.norm \"group_norm\" has none"),
            std::string::npos);
  EXPECT_NE(error_of({"model.backbone.fused_conv_relu=true", "run.deterministic=true"}, "aws-p3.16xlarge.json")
                .find("not with run.deterministic"),
            std::string::npos);
  // One shape at most until a second shape's graphs compute the eager step on a GPU.
  EXPECT_NE(error_of({"run.cuda_graph_shapes=2"}, "aws-p3.16xlarge.json").find("run.cuda_graph_shapes: at most 1"),
            std::string::npos)
      << error_of({"run.cuda_graph_shapes=2"}, "aws-p3.16xlarge.json");
  EXPECT_EQ(error_of({"run.cuda_graph_shapes=1"}, "aws-p3.16xlarge.json"), "");
  EXPECT_EQ(model_options(load_system_config(kSystems + "aws-p3.16xlarge.json", {"run.cuda_graph_shapes=1"})).cuda_graph_shapes, 1);
}

// Config validation says each rule of logging/closed_division.h's table (the one `check` runs on a
// log) in the table's words: a rule added to the table without a case here, or a message written
// apart from the table, fails.
TEST(SystemConfig, ClosedDivisionReadsTheRuleTableThatCheckReads) {
  const std::string p3 = "aws-p3dn.24xlarge.json";
  const std::map<std::string, std::pair<std::string, std::string>> breaking = {
      {"opt_base_learning_rate", {"hyperparameters.by_global_batch_size.64.base_lr=0.07", " 0.07: "}},
      {"num_image_candidates", {"hyperparameters.by_global_batch_size.64.num_image_candidates=6500", " 6500: "}},
      {"opt_learning_rate_decay_factor", {"hyperparameters.decay_factor=0.2", " 0.2: "}},
      {"opt_learning_rate_decay_steps", {"hyperparameters.by_global_batch_size.64.decay_steps=[18000]", ": "}},
  };
  for (const auto& rule : logging::closed_division::rules()) {
    const std::string key(rule.key);
    SCOPED_TRACE(key);
    ASSERT_TRUE(breaking.contains(key));
    const auto& [override_, shown] = breaking.at(key);
    const std::string error = error_of({override_}, p3);
    EXPECT_NE(error.find("\n  - " + key + shown + std::string(rule.requirement)), std::string::npos) << error;
  }
}

TEST(SystemConfig, ClosedDivisionRefusesWhatTheRulesForbidAndSaysTheRule) {
  const std::string p3 = "aws-p3dn.24xlarge.json";
  EXPECT_EQ(error_of({}, p3), "");
  EXPECT_NE(error_of({"hyperparameters.by_global_batch_size.64.base_lr=0.07"}, p3).find("0.02*K"), std::string::npos);
  EXPECT_NE(error_of({"hyperparameters.decay_factor=0.2"}, p3).find("must be 0.1"), std::string::npos);
  EXPECT_NE(error_of({"hyperparameters.by_global_batch_size.64.num_image_candidates=6500"}, p3)
                .find("multiple of 1000"),
            std::string::npos);
  EXPECT_NE(error_of({"data.min_size=640"}, p3).find("800/1333"), std::string::npos);
  EXPECT_NE(error_of({"hyperparameters.by_global_batch_size.64.decay_steps=[18000, 20000]"}, p3)
                .find("(60000, 80000) * (1 + K/10)"),
            std::string::npos);
  // K = 4: (60000, 80000) * 1.4 * 16 / 64 is allowed (the RCP's [18000, 24000] is K = 2).
  EXPECT_EQ(error_of({"hyperparameters.by_global_batch_size.64.decay_steps=[21000, 28000]"}, p3), "");
  // The same values are fine in the open division.
  EXPECT_EQ(error_of({"hyperparameters.decay_factor=0.2", "submission.division=\"open\"", "system.division=\"open\""},
                     p3),
            "");
}

// A closed file computes what the reference computes: its model section is
// model::reference_options() on every key but the speed paths (no padding masks, every cell of the
// padded batch proposing, the straddle filter at 0), and config refuses a departure naming the key.
TEST(SystemConfig, ClosedFilesComputeTheReferenceArithmetic) {
  const std::vector<std::string> free_keys = {"cuda_graph_shapes", "channels_last", "precision", "head_streams",
                                              "cpu_own_weight_grad", "sampling_streams"};
  auto comparable = [&](Json j) {
    for (const auto& k : free_keys) j.erase(k);
    j["backbone"].erase("fused_conv_relu");
    j["mask_head"].erase("roi_bucket");
    j["rpn"].erase("post_nms_top_n_train");
    j["rpn"].erase("post_nms_per_batch_train");
    return j;
  };
  const model::ModelOptions reference = model::reference_options();
  EXPECT_FALSE(reference.mask_padding);
  EXPECT_FALSE(reference.rpn.proposals_inside_image);
  EXPECT_EQ(reference.rpn.straddle_threshold, 0.0);
  EXPECT_TRUE(reference.backbone.stride_in_1x1);
  int closed = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSystems)) {
    if (e.path().extension() != ".json") continue;
    const SystemConfig c = load_system_config(e.path().string());
    if (c.submission.division != "closed") continue;
    SCOPED_TRACE(c.name);
    ++closed;
    EXPECT_EQ(comparable(model::to_json(c.model_section)), comparable(model::to_json(reference)));
    const model::ModelOptions m = model_options(c);
    EXPECT_FALSE(m.mask_padding);
    EXPECT_FALSE(m.rpn.proposals_inside_image);
  }
  EXPECT_EQ(closed, 17);  // 15 AWS files, 2 Habana files

  const std::string p5 = "aws-p5.48xlarge.json";
  EXPECT_NE(error_of({"model.mask_padding=true"}, p5)
                .find("\n  - model.mask_padding true: the closed division computes what the reference computes (false)"),
            std::string::npos)
      << error_of({"model.mask_padding=true"}, p5);
  EXPECT_NE(error_of({"model.rpn.proposals_inside_image=true"}, p5).find("model.rpn.proposals_inside_image true:"),
            std::string::npos);
  EXPECT_NE(error_of({"model.rpn.straddle_threshold=-1"}, p5).find("model.rpn.straddle_threshold -1.0:"),
            std::string::npos)
      << error_of({"model.rpn.straddle_threshold=-1"}, p5);
  EXPECT_NE(error_of({"model.backbone.depth=101"}, p5).find("model.backbone.depth 101: "), std::string::npos);
  EXPECT_NE(error_of({"model.box_head.box_loss_beta=0.1111"}, p5).find("model.box_head.box_loss_beta 0.1111: "),
            std::string::npos);
  // Two departures, two lines.
  const std::string two = error_of({"model.mask_padding=true", "model.backbone.stride_in_1x1=false"}, p5);
  EXPECT_NE(two.find("model.mask_padding true"), std::string::npos);
  EXPECT_NE(two.find("model.backbone.stride_in_1x1 false"), std::string::npos);
  // The speed paths stay free, and an open copy may depart.
  EXPECT_EQ(error_of({"model.mask_head.roi_bucket=128", "model.backbone.fused_conv_relu=false",
                      "model.sampling_streams=\"shared\"", "model.head_streams=true"},
                     p5),
            "");
  EXPECT_EQ(error_of({"model.mask_padding=true", "submission.division=\"open\"", "system.division=\"open\""}, p5), "");
}

// The warm-up needs the shapes it warms; cuDNN's benchmarking is CUDA's and not deterministic.
TEST(SystemConfig, WarmUpAndBenchmarkingAreRefusedWhereTheyCannotApply) {
  EXPECT_NE(error_of({"run.warm_up=true"}).find("run.warm_up: the warm-up runs the batch shapes a run will meet: set "
                                                "data.pad_to_shapes"),
            std::string::npos)
      << error_of({"run.warm_up=true"});
  EXPECT_EQ(error_of({"run.warm_up=true", "data.pad_to_shapes=[[128, 128]]"}), "");
  EXPECT_NE(error_of({"run.cudnn_benchmark=true"}).find("run.cudnn_benchmark: cuDNN's benchmarking is for CUDA devices"),
            std::string::npos);
  const std::string p5 = "aws-p5.48xlarge.json";
  EXPECT_EQ(error_of({"run.cudnn_benchmark=true"}, p5), "");
  EXPECT_NE(error_of({"run.cudnn_benchmark=true", "run.deterministic=true"}, p5).find("run.deterministic excludes"),
            std::string::npos);
}

// A scratch system file: cpu-dev.json with `edit` applied to its JSON.
struct ScratchSystem {
  std::filesystem::path path;
  explicit ScratchSystem(const std::function<void(Json&)>& edit) {
    Json j = read_json_file(kSystems + "cpu-dev.json");
    edit(j);
    path = std::filesystem::temp_directory_path() / ("mrcnn-config-" + std::to_string(::getpid()) + ".json");
    std::ofstream(path) << j.dump(2);
  }
  ~ScratchSystem() { std::filesystem::remove(path); }
};

TEST(SystemConfig, SetReachesKeysTheFileLeavesOut) {
  ScratchSystem s([](Json& j) {
    j["run"].erase("eval_threads");
    j["run"].erase("checkpoint_every_epoch");
  });
  // Documented keys that the file omits: they get their defaults, and --set reaches them.
  const SystemConfig d = load_system_config(s.path.string());
  EXPECT_EQ(d.run.eval_threads, 1);
  EXPECT_FALSE(d.run.checkpoint_every_epoch);
  EXPECT_EQ(d.resolved["run"]["eval_threads"], 1);           // the defaults are written back
  EXPECT_EQ(d.resolved["run"]["initial_weights"], "");
  EXPECT_EQ(d.resolved["run"]["cache_clear"], false);
  const SystemConfig c = load_system_config(
      s.path.string(), {"run.eval_threads=2", "run.initial_weights=\"w.safetensors\"", "run.cache_clear=true",
                        "run.checkpoint_every_epoch=true", "launch.env.FI_PROVIDER=efa"});
  EXPECT_EQ(c.run.eval_threads, 2);
  EXPECT_EQ(c.run.initial_weights, "w.safetensors");
  EXPECT_TRUE(c.run.cache_clear);
  EXPECT_TRUE(c.run.checkpoint_every_epoch);
  EXPECT_EQ(c.launch.env.at("FI_PROVIDER"), "efa");
  // Every shipped AWS file leaves run.async_eval out; --set still sets it.
  EXPECT_FALSE(load_system_config(kSystems + "aws-p3dn.24xlarge.json", {"run.async_eval=false"}).run.async_eval);
}

TEST(SystemConfig, AMissingSectionNamesTheFileNotTheOverride) {
  ScratchSystem s([](Json& j) { j.erase("run"); });
  std::string error;
  try {
    load_system_config(s.path.string(), {"run.seed=3"});
  } catch (const ConfigError& e) {
    error = e.what();
  }
  EXPECT_EQ(error.rfind(s.path.string() + ": no \"run\" section", 0), 0u) << error;
  EXPECT_EQ(error.find("--set"), std::string::npos) << error;
}

TEST(SystemConfig, ErrorsNameTheFileForItsOwnValues) {
  ScratchSystem s([](Json& j) { j["run"]["max_epochs"] = 0; });
  std::string error;
  try {
    load_system_config(s.path.string());
  } catch (const ConfigError& e) {
    error = e.what();
  }
  EXPECT_EQ(error, s.path.string() + ": run.max_epochs: expected a value in [1, 100000], got 0");
}

TEST(SystemConfig, TheResolvedConfigurationLoadsAgainAsTheSameConfiguration) {
  for (const char* name : {"cpu-dev.json", "aws-p3dn.24xlarge.json", "aws-p5.48xlarge-8n.json", "habana-gaudi2-hls.json"}) {
    SCOPED_TRACE(name);
    const SystemConfig a = load_system_config(kSystems + name, {"run.seed=9"});
    ScratchSystem s([&](Json& j) { j = a.resolved; });
    const SystemConfig b = load_system_config(s.path.string());
    EXPECT_EQ(a.resolved.dump(), b.resolved.dump());
    EXPECT_EQ(b.run.seed, 9);
    EXPECT_EQ(model::to_json(model_options(a)).dump(), model::to_json(model_options(b)).dump());
  }
}

// data.pad_to_shapes: [[height, width], ...], each a multiple of data.size_divisible, no shape twice;
// empty by default (each batch padded to its own size). The AWS GPU files pad as NVIDIA does, one
// shape per orientation; the Habana files have no graphs to make and keep each batch's own size.
TEST(SystemConfig, PadToShapesAreReadCheckedAndWrittenBack) {
  const std::vector<data::ImageSize> nvidia = {{800, 1344}, {1344, 800}};
  const SystemConfig dev = load_system_config(kSystems + "cpu-dev.json");
  EXPECT_TRUE(dev.data.pad_to_shapes.empty());
  EXPECT_EQ(dev.resolved["data"]["pad_to_shapes"], Json::array());  // the default, written back
  int aws = 0;
  for (const auto& e : std::filesystem::directory_iterator(kSystems)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(name);
    const SystemConfig c = load_system_config(e.path().string());
    if (name.starts_with("aws-")) {
      ++aws;  // the three bases set it; every multi-node file inherits it
      EXPECT_EQ(c.data.pad_to_shapes, nvidia);
      EXPECT_EQ(c.resolved["data"]["pad_to_shapes"], Json::parse("[[800, 1344], [1344, 800]]"));
    } else {
      EXPECT_TRUE(c.data.pad_to_shapes.empty());
    }
  }
  EXPECT_EQ(aws, 15);

  const SystemConfig set = load_system_config(kSystems + "cpu-dev.json", {"data.pad_to_shapes=[[640, 1088], [800, 1344]]"});
  EXPECT_EQ(set.data.pad_to_shapes, (std::vector<data::ImageSize>{{640, 1088}, {800, 1344}}));
  EXPECT_EQ(set.resolved["data"]["pad_to_shapes"], Json::parse("[[640, 1088], [800, 1344]]"));
  EXPECT_EQ(load_system_config(kSystems + "cpu-dev.json", {"data.size_divisible=1", "data.pad_to_shapes=[[801, 1333]]"})
                .data.pad_to_shapes,
            (std::vector<data::ImageSize>{{801, 1333}}));

  // Each error names the key (and the --set argument that put the value there).
  const std::string k = "data.pad_to_shapes: expected a list of [height, width] pairs of integers from 1 to 16384";
  const std::map<std::string, std::string> bad = {
      {"[[800, 1333]]", "data.pad_to_shapes: entry 0 [800, 1333] is not a multiple of data.size_divisible 32"},
      {"[[800, 1344], [1344, 800], [800, 1344]]", "data.pad_to_shapes: entry 2 [800,1344] is listed twice"},
      {"[[0, 32]]", k + ", e.g. [[800, 1344], [1344, 800]]; entry 0 is [0,32]"},
      {"[[-32, 32]]", k},
      {"[[32, 32768]]", k},
      {"[800, 1344]", k + ", e.g. [[800, 1344], [1344, 800]]; entry 0 is 800"},
      {"[[800, 1344, 3]]", k},
      {"[[800]]", k},
      {"[[800.5, 1344]]", k},
      {"[[\"800\", 1344]]", k},
      {"\"800x1344\"", k + ", e.g. [[800, 1344], [1344, 800]], got \"800x1344\""},
      {"{\"h\": 800}", k},
  };
  for (const auto& [value, want] : bad) {
    const std::string arg = "data.pad_to_shapes=" + value;
    const std::string got = error_of({arg});
    EXPECT_EQ(got.rfind("--set " + arg + ": ", 0), 0u) << got;
    EXPECT_NE(got.find(want), std::string::npos) << value << ": " << got;
  }
  EXPECT_NE(error_of({"data.size_divisible=64"}, "aws-p5.48xlarge.json")
                .find("data.pad_to_shapes: entry 0 [800, 1344] is not a multiple of data.size_divisible 64"),
            std::string::npos)
      << error_of({"data.size_divisible=64"}, "aws-p5.48xlarge.json");
  // A file's own bad value is blamed on the file.
  ScratchSystem s([](Json& j) { j["data"]["pad_to_shapes"] = Json::parse("[[800, 1344], [1344, 801]]"); });
  std::string error;
  try {
    load_system_config(s.path.string());
  } catch (const ConfigError& e) {
    error = e.what();
  }
  EXPECT_EQ(error, s.path.string() +
                       ": data.pad_to_shapes: entry 1 [1344, 801] is not a multiple of data.size_divisible 32 in both "
                       "sides (batches are padded to multiples of it)");
}

TEST(SystemConfig, PadToShapesRoundTripThroughTheResolvedConfiguration) {
  for (const auto& [name, overrides] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"aws-p5.48xlarge.json", {}},
           {"aws-p5.48xlarge-8n.json", {}},
           {"cpu-dev.json", {}},
           {"cpu-dev.json", {"data.pad_to_shapes=[[1344, 800], [640, 1088], [800, 1344]]"}}}) {
    SCOPED_TRACE(name);
    const SystemConfig a = load_system_config(kSystems + name, overrides);
    ScratchSystem s([&](Json& j) { j = a.resolved; });
    const SystemConfig b = load_system_config(s.path.string());
    EXPECT_EQ(b.data.pad_to_shapes, a.data.pad_to_shapes);  // in the order listed: ties go to the first
    EXPECT_EQ(a.resolved["data"]["pad_to_shapes"].dump(), b.resolved["data"]["pad_to_shapes"].dump());
    EXPECT_EQ(a.resolved.dump(), b.resolved.dump());
  }
}

TEST(SystemConfig, ResolvedValuesForScripts) {
  const SystemConfig c = load_system_config(kSystems + "aws-p3dn.24xlarge.json");
  EXPECT_EQ(resolved_value(c, "launch.world_size"), c.launch.nodes * c.launch.ranks_per_node);
  EXPECT_EQ(resolved_value(c, "name"), "aws-p3dn.24xlarge");
  EXPECT_EQ(resolved_value(c, "run.seed"), c.run.seed);
  EXPECT_THROW(resolved_value(c, "run.nope"), ConfigError);
}

}  // namespace
}  // namespace mrcnn::config
