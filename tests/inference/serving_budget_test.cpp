// The 'serving-budget' plugin: vLLM's KV cache budget (Kwon et al. 2023, arXiv
// 2309.06180; vLLM Worker.determine_num_available_blocks):
//   blocks = max(0, floor((u x GPU memory - non-KV peak) / block bytes))
// Its figures are attributes ("report.*", kv.*, limits.memory_fraction), read
// back from the estimator after the evaluation.
#include <gtest/gtest.h>

#include <string>

#include "inference_scenarios.hpp"
#include "test_support.hpp"

namespace memplan::testing {
namespace {

std::string budget(const std::string& options, const std::string& hardware) {
  return "[[strategy]]\nuse = \"serving-budget\"\n" + options + "[hardware]\n" + hardware;
}

// Llama-2-7B in fp16, one sequence of 4096 tokens, on a 24 GiB RTX 4090 with
// gpu_memory_utilization u = 0.9. By hand:
//   weights     6,738,415,616 x 2 B                         = 13,476,831,232
//   transients  one layer's prefill 337,641,472 + logits 128,000 (forward_transient_test.cpp)
//   non-KV      13,476,831,232 + 337,641,472 + 128,000      = 13,814,600,704
//   budget      0.9 x 24 x 2^30 = 0.9 x 25,769,803,776      = 23,192,823,398.4
//   free        23,192,823,398.4 - 13,814,600,704           =  9,378,222,694.4
//   block       16 tokens x 524,288 B (all 32 layers)       =      8,388,608 (8 MiB)
//   blocks      floor(9,378,222,694.4 / 8,388,608) = floor(1117.97) = 1117
//   tokens      1117 x 16                                   = 17,872
//   sequences   ceil(4096 / 16) = 256 blocks each; floor(1117 / 256) = 4
TEST(ServingBudget, Llama2_7BOnA24GiBGpu) {
  const std::string text = infer_scenario(preset("llama-2-7b"), 1, 4096, "",
                                          budget("gpu_memory_utilization = 0.9\n", "gpu = \"rtx-4090-24gb\"\n"),
                                          "mixed-fp16");
  Evaluation probe(paper(text));
  EXPECT_EQ(probe.estimator().attribute_double("limits.memory_fraction"), 0.9);
  EXPECT_EQ(probe.estimator().attribute_int("kv.block_tokens"), 16);
  EXPECT_EQ(probe.estimator().attribute_double("kv.block_bytes"), 8'388'608.0);
  EXPECT_EQ(probe.estimator().attribute_int("report.non_kv_bytes"), 13'814'600'704);
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_budget_bytes"), 9'378'222'694);
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_blocks"), 1117);
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_tokens"), 17'872);
  EXPECT_EQ(probe.estimator().attribute_int("report.max_sequences_at_seq_len"), 4);
  EXPECT_EQ(probe.estimator().attribute_string("report.kv_note"), std::nullopt);

  // The core's evaluation of the same scenario: its peak is the non-KV high
  // point plus the 2 GiB the one sequence caches (256 blocks of 8 MiB).
  Evaluation e = evaluate_paper(text);
  EXPECT_EQ(e.breakdown().peak, 13'814'600'704u + 2'147'483'648u);
  EXPECT_EQ(e.component(MEMPLAN_ROLE_KV_CACHE), 256u * 8'388'608);
  EXPECT_EQ(bytes_named(probe.estimator().plan().items, "kv_cache"), e.component(MEMPLAN_ROLE_KV_CACHE));
}

// The default u is vLLM's 0.9.
TEST(ServingBudget, DefaultUtilizationIsVllms) {
  Evaluation probe(paper(infer_scenario(preset("llama-2-7b"), 1, 4096, "", budget("", "memory_gib = 24\n"),
                                      "mixed-fp16")));
  EXPECT_EQ(probe.estimator().attribute_double("limits.memory_fraction"), 0.9);
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_blocks"), 1117);
}

// The same model on 80 GiB with u = 1:
//   free   85,899,345,920 - 13,814,600,704 = 72,084,745,216
//   blocks floor(72,084,745,216 / 8,388,608) = floor(8593.17) = 8593; tokens 137,488
//   sequences of 4096: floor(8593 / 256) = 33
TEST(ServingBudget, WholeGpu) {
  Evaluation probe(paper(infer_scenario(preset("llama-2-7b"), 1, 4096, "",
                                      budget("gpu_memory_utilization = 1\n", "memory_gib = 80\n"), "mixed-fp16")));
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_blocks"), 8593);
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_tokens"), 137'488);
  EXPECT_EQ(probe.estimator().attribute_int("report.max_sequences_at_seq_len"), 33);
}

// Llama-2-70B in bf16 on one 80 GiB GPU: the weights alone (137,953,296,384 B)
// exceed 0.9 x 80 GiB = 72 GiB. Non-KV = weights + one layer's prefill
// (2 x 2 x 4096 x 8192 + 2 x 4096 x 28672 x 3 = 838,860,800) + logits 128,000
// = 138,792,285,184 B = 129.26 GiB: no block fits.
TEST(ServingBudget, NothingLeftForTheCache) {
  Evaluation probe(paper(infer_scenario(preset("llama-2-70b"), 1, 4096, "", budget("", "gpu = \"h100-sxm-80gb\"\n"))));
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_blocks"), 0);
  EXPECT_EQ(probe.estimator().attribute_int("report.kv_tokens"), 0);
  EXPECT_EQ(probe.estimator().attribute_int("report.max_sequences_at_seq_len"), 0);
  EXPECT_EQ(probe.estimator().attribute_int("report.non_kv_bytes"), 138'792'285'184);
  EXPECT_EQ(probe.estimator().attribute_string("report.kv_note"),
            "no memory is left for the KV cache: weights and activations take 129.26 GiB of the budget of 72.00 GiB "
            "(gpu_memory_utilization 0.9 x GPU memory); lower the model's footprint (quantize, tensor-parallel) or "
            "raise gpu_memory_utilization");
}

// Tensor parallelism shrinks the block: Llama-2-70B over 8 ranks keeps one kv
// head per rank, 16 tokens x 2 x 80 x 1 x 128 x 2 B = 655,360 B per block.
TEST(ServingBudget, TensorParallelBlock) {
  Evaluation probe(paper(infer_scenario(
      preset("llama-2-70b"), 1, 4096, "",
      "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n" + budget("", "gpu = \"h100-sxm-80gb\"\ncount = 8\n"))));
  EXPECT_EQ(probe.estimator().attribute_double("kv.block_bytes"), 655'360.0);
  const int64_t blocks = probe.estimator().attribute_int("report.kv_blocks").value_or(-1);
  EXPECT_EQ(blocks, probe.estimator().attribute_int("report.kv_budget_bytes").value_or(0) / 655'360);
  EXPECT_EQ(probe.estimator().attribute_int("report.max_sequences_at_seq_len"), blocks / 256);
}

// Errors, with their exact located messages. infer_scenario puts
// [[strategy]] on line 12, its use on line 13 and its first option on line 14.
std::string library() { return " (plugin library " + plugin_dir() + "/memplan-serving-budget.so)"; }

// vLLM from 0.12 (charged = "since-nccl"; gpu_worker.py determine_available_memory and mem_utils.py
// memory_profiling @ 35d5cda1): the budget charges the weights, the profile run's torch peak increase
// (allocated bytes) and the non-torch increase since the snapshot taken after the CUDA context and NCCL.
// Llama-3.1-8B in bf16 on one H100 80GB, `vllm serve` 0.19 with gpu_memory_utilization 0.95 and
// max_model_len 8192 (llm-d-incubation/llm-d-planner @ d3121e0, accuracy/results/v0.19.0/logs/
// meta-llama-llama-3-1-8b-...--tp1pp1dp1--8192.log). By hand, from the plan:
//   allocated, persistent  weights 16,060,522,496 + rotary table 33,554,432 + cuBLAS workspace 33,554,432
//                                                                  = 16,127,631,360
//   allocated, transient   one 8192-token chunk's layer 838,860,800 + logits 513,024
//                          + the sampler run's 1024 rows 1,083,190,272            =  1,922,564,096
//   context growth         719 MiB serving context - 527 MiB at start-up           =    201,326,592
//   non-KV                                                                        = 18,251,522,048
//   budget                 0.95 x 84,943,715,697 (79.11 GiB, CUDA's total)         = 80,696,529,912.15
//   free                   80,696,529,912.15 - 18,251,522,048                     = 62,445,007,864
//   blocks                 floor(62,445,007,864 / 2,097,152 (16 tokens x 131,072 B)) = 29,776: 476,416 tokens
// The log: weights 14.99 GiB + torch peak increase 1.89 + non-torch increase 0.25 = 17.12 GiB (memplan 17.00),
// "Available KV cache memory: 58.11 GiB", "GPU KV cache size: 476,016 tokens" (memplan 58.16 GiB, +0.08 %;
// its H100 reports 79.19 GiB, the catalog's 79.11). The fit allows what vLLM does not charge, the context's
// 527 MiB at start-up (552,599,552) and the allocator's reserve (193,293,722): memory_fraction = 0.95 +
// 745,893,274 / 84,943,715,697 = 0.958781, so the peak fits exactly when the KV cache fits the budget.
TEST(ServingBudget, Vllm012ChargesWhatTheProcessAddsAfterItsSnapshot) {
  const std::string scenario =
      "name = \"t\"\nmode = \"infer\"\n[framework]\nuse = \"vllm\"\nversion = \"0.19\"\n[model]\npreset = "
      "\"llama-3.1-8b\"\n[batch]\nmicro_batch = %B%\nseq_len = 8192\n[precision]\nuse = \"bf16\"\n[activations]\nuse = "
      "\"inference\"\n[[strategy]]\nuse = \"serving-budget\"\ngpu_memory_utilization = 0.95\n[hardware]\ngpu = "
      "\"h100-sxm-80gb\"\n";
  const auto at = [&](int sequences) {
    std::string text = scenario;
    text.replace(text.find("%B%"), 3, std::to_string(sequences));
    return text;
  };
  Evaluation one(at(1));
  EXPECT_EQ(one.estimator().attribute_int("report.non_kv_bytes"), 18'251'522'048);
  // V1 before 0.12 (charged = "since-context", the profile's from 0.8: the snapshot after the CUDA context,
  // before NCCL; gpu_worker.py init_device @ v0.9.2) charges NCCL's buffers too, of which one GPU has none: the
  // device non-KV less the context's 527 MiB at start-up and the allocator's reserve, what "since-nccl" charges
  // (at 0.11 the sampler's sort path makes both 21,403,541,504: 1024 x 128,256 x (38 - 14) = 3,152,019,456 more).
  std::string v011 = at(1);
  v011.replace(v011.find("version = \"0.19\""), 16, "version = \"0.11\"");
  std::string nccl = v011;
  nccl.replace(nccl.find("gpu_memory_utilization = 0.95\n"), 29, "gpu_memory_utilization = 0.95\ncharged = \"since-nccl\"\n");
  EXPECT_EQ(Evaluation(v011).estimator().attribute_int("report.non_kv_bytes"), 21'403'541'504);
  EXPECT_EQ(Evaluation(nccl).estimator().attribute_int("report.non_kv_bytes"), 21'403'541'504);
  EXPECT_EQ(one.estimator().attribute_int("report.kv_budget_bytes"), 62'445'007'864);
  EXPECT_EQ(one.estimator().attribute_int("report.kv_blocks"), 29'776);
  EXPECT_EQ(one.estimator().attribute_int("report.kv_tokens"), 476'416);
  EXPECT_EQ(one.estimator().attribute_int("report.max_sequences_at_seq_len"), 58);
  EXPECT_NEAR(one.breakdown().memory_fraction, 0.95 + 745'893'274.0 / 84'943'715'697.0, 1e-12);
  // The budget's 58 sequences of 8192 tokens fit; a 59th does not (each holds 512 blocks, 1 GiB).
  EXPECT_TRUE(Evaluation(at(58)).breakdown().peak <=
              Evaluation(at(58)).breakdown().capacity(84'943'715'697));
  EXPECT_FALSE(Evaluation(at(59)).breakdown().peak <=
               Evaluation(at(59)).breakdown().capacity(84'943'715'697));
  // charged = "device" (the default, and the profile's before 0.12) charges every device byte of the non-KV
  // high point: also the context's 527 MiB at start-up and the allocator's reserve, 18,251,522,048 +
  // 552,599,552 + 193,293,722 = 18,997,415,322; the scenario's value wins over the profile's.
  std::string device = at(1);
  device.replace(device.find("gpu_memory_utilization"), 0, "charged = \"device\"\n");
  Evaluation before(device);
  EXPECT_EQ(before.estimator().attribute_int("report.non_kv_bytes"), 18'997'415'322);
  EXPECT_EQ(before.breakdown().memory_fraction, 0.95);
}

// SGLang (charged = "static", the sglang profile's; model_runner.py profile_max_num_token @ 01cc04e2:
// rest_memory = available_gpu_memory - total_gpu_memory x (1 - mem_fraction_static), total_gpu_memory the
// free memory once the CUDA context and the distributed environment exist, available_gpu_memory the free
// memory after loading the weights): the pool is u x the memory free at start-up less the weights' segments.
// Llama-3.1-8B-Instruct on one H100 80GB with mem_fraction_static 0.88, sgl-project/sglang PR #4760's log of
// 2025-03-25 (validation/SGL-v044-llama3.1-8b-tp1-pool): "avail mem=63.48 GB, mem usage=15.11 GB" (so 78.59
// GiB free at start-up), "KV Cache is allocated. #tokens: 442750". By hand, from the plan:
//   free at start-up  84,943,715,697 (79.11 GiB, CUDA's total) - the context as created, 527 MiB 552,599,552
//                                                                           = 84,391,116,145 (78.60 GiB)
//   budget            0.88 x 84,391,116,145                                 = 74,264,182,207.6
//   weights' segments weights 16,060,522,496 + cuBLAS workspace 33,554,432 + the allocator's rounding of the
//                     pool's per-layer buffers 16,908,288                   = 16,110,985,216 (log: 15.11 GiB)
//   pool              74,264,182,207.6 - 16,110,985,216                     = 58,153,196,991
//   tokens            floor(58,153,196,991 / 131,072 (32 layers x 2 x 8 x 128 x 2 B)) = 443,673 (log 442,750, +0.21 %)
TEST(ServingBudget, SglangPoolIsTheStaticShareLessTheWeights) {
  Evaluation e("name = \"t\"\nmode = \"infer\"\n[framework]\nuse = \"sglang\"\n[model]\npreset = \"llama-3.1-8b\"\n"
               "[batch]\nmicro_batch = 1\nseq_len = 442751\n[precision]\nuse = \"bf16\"\n[activations]\nuse = "
               "\"inference\"\nprefill_chunk = 1\n[[strategy]]\nuse = \"serving-budget\"\ngpu_memory_utilization = 0.88\n"
               "[hardware]\ngpu = \"h100-sxm-80gb\"\n");
  EXPECT_EQ(e.estimator().attribute_int("report.non_kv_bytes"), 16'110'985'216);
  EXPECT_EQ(e.estimator().attribute_int("report.kv_budget_bytes"), 58'153'196'991);
  EXPECT_EQ(e.estimator().attribute_int("report.kv_tokens"), 443'673);
  // The log's pool of 442,750 tokens (and its padded slot) fits; the fit allows what is outside the static
  // share: (58,153,196,991.6 + the device non-KV high point 16,865,588,327) / 84,943,715,697.
  EXPECT_TRUE(e.breakdown().peak <= e.breakdown().capacity(84'943'715'697));
  EXPECT_NEAR(e.breakdown().memory_fraction, (58'153'196'991.6 + 16'865'588'327.0) / 84'943'715'697.0, 1e-9);
}

TEST(ServingBudgetErrors, ChargedNamesAnAccounting) {
  EXPECT_NE(error_of(infer_scenario(preset("llama-2-7b"), 1, 4096, "",
                                    budget("charged = \"allocated\"\n", "memory_gib = 24\n")),
                     "s.toml")
                .find("option 'charged': must be \"device\", \"since-nccl\", \"since-context\" or \"static\", not "
                      "\"allocated\""),
            std::string::npos);
}

TEST(ServingBudgetErrors, NeedsAGpu) {
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 4096, "", "[[strategy]]\nuse = \"serving-budget\"\n"),
                     "s.toml"),
            "s.toml:13:7: error: in [[strategy]] #1, strategy plugin 'serving-budget': needs the GPU's memory to "
            "budget the KV cache: set [hardware] gpu or memory_gib" + library());
}

TEST(ServingBudgetErrors, UtilizationIsAFraction) {
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 4096, "",
                                    budget("gpu_memory_utilization = 1.5\n", "memory_gib = 24\n")),
                     "s.toml"),
            "s.toml:14:26: error: in [[strategy]] #1, strategy plugin 'serving-budget', option "
            "'gpu_memory_utilization': must be greater than 0 and at most 1 (a fraction of GPU memory), got 1.5" +
                library());
  EXPECT_EQ(error_of(infer_scenario(preset("llama-2-7b"), 1, 4096, "",
                                    budget("gpu_memory_utilization = 0\n", "memory_gib = 24\n")),
                     "s.toml"),
            "s.toml:14:26: error: in [[strategy]] #1, strategy plugin 'serving-budget', option "
            "'gpu_memory_utilization': must be greater than 0 and at most 1 (a fraction of GPU memory), got 0" +
                library());
}

TEST(ServingBudgetErrors, NeedsAKvCachePlugin) {
  EXPECT_EQ(error_of("name = \"t\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-7b\"\n[batch]\nseq_len = 1024\n"
                     "[precision]\nuse = \"bf16\"\n[activations]\nuse = \"none\"\n[[strategy]]\nuse = "
                     "\"serving-budget\"\n[hardware]\nmemory_gib = 24\n",
                     "s.toml"),
            "s.toml:12:7: error: in [[strategy]] #1, strategy plugin 'serving-budget': attribute 'kv.block_bytes' is "
            "not set: no plugin declared a paged KV cache; use [activations] use = \"inference\" (mode = \"infer\")" +
                library());
}

}  // namespace
}  // namespace memplan::testing
