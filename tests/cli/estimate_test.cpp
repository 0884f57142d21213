// `memplan estimate MODEL` (issue 13 item 2): a question by model name. Each
// task must give exactly the figures of the repository's example scenario
// that asks the same question (only the scenario's name and the plugins list
// differ: a task lists its parallel strategies at size 1), and the scenario
// --print-scenario prints must be what it evaluates.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "memplan/core/error.hpp"
#include "memplan/core/task.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

using nlohmann::json;

json run_json(const std::string& arguments) {
  const CommandResult result = run_cli(arguments + " --format json");
  EXPECT_EQ(result.exit_code, 0) << arguments << "\n" << result.err;
  return json::parse(result.out, nullptr, false);
}

// Every field of the JSON report but the scenario's name and the plugins.
void expect_same_figures(json estimate, json run) {
  ASSERT_FALSE(estimate.is_discarded());
  ASSERT_FALSE(run.is_discarded());
  for (json* report : {&estimate, &run}) {
    report->erase("scenario");
    report->erase("plugins");
  }
  EXPECT_EQ(estimate, run);
}

std::string example(const std::string& name) { return "'" + source_dir() + "/examples/" + name + ".toml'"; }

TEST(EstimateCommand, FinetuneIsTheSingleGpuExample) {
  // The default task, finetune. examples/llama2-7b-single-gpu.toml: grad_accum 16, full recomputation, one H100.
  expect_same_figures(run_json("estimate llama-2-7b --grad-accum 16 --recompute full --gpus 1"),
                      run_json("run " + example("llama2-7b-single-gpu")));
}

TEST(EstimateCommand, ServeIsTheTensorParallelExample) {
  // examples/infer-llama-3.1-70b-bf16-tp4.toml: 8 sequences of 8192 tokens, TP 4, prefill_chunk 8192, which is
  // the task's default on an H100 80GB: the serving default profile (vllm) gives `vllm serve`'s
  // max_num_batched_tokens, 8192 on GPUs of 70 GiB or more (plugins/frameworks/vllm/README.md).
  expect_same_figures(run_json("estimate llama-3.1-70b --task serve --tp 4 --gpus 4 --micro-batch 8 --seq-len 8192"),
                      run_json("run " + example("infer-llama-3.1-70b-bf16-tp4")));
}

TEST(EstimateCommand, LoraIsTheAdapterExample) {
  // examples/train-lora-llama2-7b-r8-qv.toml: r 8 on q and v (the task's defaults), alpha 32, one A100 40GB.
  expect_same_figures(run_json("estimate llama-2-7b --task lora --grad-accum 8 --gpu a100-sxm-40gb --gpus 1 "
                               "--set strategy.1.alpha=32"),
                      run_json("run " + example("train-lora-llama2-7b-r8-qv")));
}

// A Hugging Face model: its config.json, or the folder holding it, gives the
// preset's figures (tests/catalog checks the two inventories agree).
TEST(EstimateCommand, ConfigJsonOrItsFolder) {
  const std::string folder = source_dir() + "/tests/catalog/fixtures/llama-2-7b";
  const json preset = run_json("estimate llama-2-7b --task qlora");
  expect_same_figures(run_json("estimate '" + folder + "' --task qlora"), preset);
  expect_same_figures(run_json("estimate '" + folder + "/config.json' --task qlora"), preset);
}

TEST(EstimateCommand, PrintedScenarioIsWhatItEvaluates) {
  TempDir dir;
  const CommandResult printed = run_cli("estimate mistral-7b --task serve --micro-batch max --kv-dtype fp8 --print-scenario");
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  EXPECT_NE(printed.out.find("kv_dtype = 'fp8'"), std::string::npos) << printed.out;
  EXPECT_NE(printed.out.find("micro_batch = 'max'"), std::string::npos) << printed.out;
  const std::string file = dir.write("printed.toml", printed.out);
  const json estimate = run_json("estimate mistral-7b --task serve --micro-batch max --kv-dtype fp8");
  const json run = run_json("run '" + file + "'");
  EXPECT_EQ(estimate, run);  // the same scenario, name and plugins included
}

TEST(EstimateCommand, ErrorsSayWhatAndHowToFix) {
  CommandResult result = run_cli("estimate llama-2-7b --task srve");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "memplan: error: no task named 'srve'. Did you mean 'serve'? Tasks: finetune, lora, qlora, "
                        "serve (memplan estimate --help says what each asks).\n");
  result = run_cli("estimate llama-2-7c");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("'llama-2-7c' is neither a model preset nor a config.json. Did you mean 'llama-2-7b'"),
            std::string::npos)
      << result.err;
  result = run_cli("estimate llama-2-7b --gpu h100");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("--gpu 'h100' is not in the GPU catalog. Did you mean 'h100-pcie-80gb' or "
                            "'h100-sxm-80gb'? `memplan gpus` lists them."),
            std::string::npos)
      << result.err;
  result = run_cli("estimate");
  EXPECT_EQ(result.exit_code, 2);
  // An option of another task, or a typo: the command's own help has the list.
  result = run_cli("estimate llama-2-7b --task serve --pp 2");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.err, "memplan: error: unrecognised option '--pp' (see memplan estimate --help)\n");
  // A plugin's refusal points into the built scenario, and says where to see it.
  result = run_cli("estimate llama-2-7b --tp 3 --gpus 3");
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find("memplan estimate llama-2-7b:"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("3 does not divide the 32 attention heads"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("(the line and column of the scenario --print-scenario prints)"), std::string::npos);
  // --check: a full fine-tune of a 7B model does not fit one 80 GB GPU without sharding.
  EXPECT_EQ(run_cli("estimate llama-2-7b --check").exit_code, 3);
}

TEST(EstimateCommand, HelpListsTasksAndTheTasksOptions) {
  const CommandResult help = run_cli("estimate --help --task serve");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("  qlora\tQLoRA: NF4 with double quantization"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--zero --recompute (the default)\n"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("options of task 'serve'"), std::string::npos);
  EXPECT_NE(help.out.find("--kv-dtype"), std::string::npos);
}

// Task files: what read_task refuses, located.
TEST(TaskFiles, MalformedTasksAreLocated) {
  TempDir dir;
  const std::string with_model = dir.write("m.toml",
                                           "[task]\nname = \"m\"\nsummary = \"s\"\nsource = \"x\"\n"
                                           "scenario = '''\nmode = \"train\"\n[model]\npreset = \"llama-2-7b\"\n'''\n");
  try {
    read_task(with_model);
    ADD_FAILURE() << "a task that sets [model] was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(with_model + ":5:12: error: the scenario sets 'model'"), std::string::npos)
        << error.what();
  }
  const std::string taken = dir.write("t.toml",
                                      "[task]\nname = \"t\"\nsummary = \"s\"\nsource = \"x\"\nscenario = 'mode = \"train\"'\n"
                                      "[options.gpu]\nkey = \"hardware.gpu\"\nhelp = \"h\"\n");
  try {
    read_task(taken);
    ADD_FAILURE() << "an option named like the command's own was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("--gpu is an option of `memplan estimate` itself"), std::string::npos)
        << error.what();
  }
  // Every installed task reads.
  EXPECT_EQ(load_tasks(data_dir()).size(), 4u);
}

}  // namespace
}  // namespace memplan::testing
