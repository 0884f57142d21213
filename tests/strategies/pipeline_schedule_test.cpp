// 'pipeline-parallel': the interleaved 1F1B schedule (virtual_stages) and
// uneven first/last stages.
//
// Interleaved schedule, counted as Megatron-LM's schedules.py does: rank r of
// p runs min(2 (p - r - 1) + (m - 1) p, M m) warm-up forward passes of one
// model chunk (the stage's layers / m) and one more forward before its first
// backward, so it holds min(2 (p - r - 1) + (m - 1) p + 1, M m) chunk passes.
// GPT-3 175B, t = 8, p = 8, m = 3 (12 layers per stage, chunks of 4), TP only:
// one layer and micro-batch stores 578,813,952 bytes (Korthikanti Table 2).
//   first stage, M = 64: min(14 + 16 + 1, 192) = 31 chunks = 31/3 micro-batches
//                        of 12 layers: 12 x 31/3 x 578,813,952 = 71,772,930,048
//                        (= L (1 + (p - 1)/(p m)) layers, Korthikanti section 4.2.3)
//   last stage, M = 64:  min(0 + 16 + 1, 192) = 17 chunks: 12 x 17/3 x 578,813,952
//                        = 39,359,348,736
//   first stage, M = 9:  min(31, 27) = 27 chunks (all forwards first):
//                        12 x 9 x 578,813,952 = 62,511,906,816
//   first stage, M = 8:  min(31, 24) = 24 chunks = 8 micro-batches, no more than
//                        plain 1F1B: 12 x 8 x 578,813,952 = 55,566,139,392
#include <gtest/gtest.h>

#include <string>

#include "test_support.hpp"

namespace memplan::testing {
namespace {

constexpr uint64_t kGpt3TpLayer = 578'813'952;

std::string gpt3(int micro_batches, const std::string& pipeline) {
  return "name = \"pp\"\nmode = \"train\"\n[model]\npreset = \"gpt3-175b\"\n[batch]\nmicro_batch = 1\nseq_len = 2048\n"
         "grad_accum = " +
         std::to_string(micro_batches) +
         "\n[precision]\nuse = \"mixed-fp16\"\n[optimizer]\nuse = \"adam\"\n[activations]\nuse = \"megatron\"\n"
         "[[strategy]]\nuse = \"tensor-parallel\"\nsize = 8\n[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 8\n" +
         pipeline;
}

uint64_t layers_item(const std::string& toml, const std::string& name) {
  return evaluate_paper(toml).item_bytes(name, MEMPLAN_ROLE_ACTIVATIONS);
}

TEST(InterleavedPipeline, FirstStageHoldsOnePlusPMinusOneOverPmTimesL) {
  EXPECT_EQ(layers_item(gpt3(64, "virtual_stages = 3\n"), "layers.0-11.activations"), 71'772'930'048u);
  EXPECT_EQ(71'772'930'048u * 24, 96 * kGpt3TpLayer * 31);  // L (1 + 7/24) layers' worth
}

TEST(InterleavedPipeline, LastStageHoldsTheChunksOfItsWarmUp) {
  EXPECT_EQ(layers_item(gpt3(64, "virtual_stages = 3\nstage = \"last\"\n"), "layers.84-95.activations"),
            39'359'348'736u);
  EXPECT_EQ(39'359'348'736u * 3, 12 * 17 * kGpt3TpLayer);
  // Without interleaving the last stage holds one micro-batch.
  EXPECT_EQ(layers_item(gpt3(64, "stage = \"last\"\n"), "layers.84-95.activations"), 12 * kGpt3TpLayer);
}

TEST(InterleavedPipeline, FewMicroBatchesCapTheWarmUp) {
  EXPECT_EQ(layers_item(gpt3(9, "virtual_stages = 3\n"), "layers.0-11.activations"), 62'511'906'816u);
  EXPECT_EQ(layers_item(gpt3(8, "virtual_stages = 3\n"), "layers.0-11.activations"), 55'566'139'392u);
  EXPECT_EQ(layers_item(gpt3(8, ""), "layers.0-11.activations"), 55'566'139'392u);
  // Two micro-batches: min(31, 6) chunks = 2 micro-batches, as plain 1F1B.
  EXPECT_EQ(layers_item(gpt3(2, "virtual_stages = 3\n"), "layers.0-11.activations"), 12 * 2 * kGpt3TpLayer);
}

// Llama-2-70B (80 layers, per layer 2 x 67,108,864 bytes of attn.q in bf16)
// over 4 stages with Megatron-LM's decoder_first/last_pipeline_num_layers.
std::string llama70b(const std::string& pipeline) {
  return "name = \"pp\"\nmode = \"train\"\n[model]\npreset = \"llama-2-70b\"\n[batch]\nmicro_batch = 1\n"
         "seq_len = 4096\ngrad_accum = 8\n[precision]\nuse = \"mixed-bf16\"\n[optimizer]\nuse = \"adamw\"\n"
         "[activations]\nuse = \"megatron\"\nflash_attention = true\ndropout = false\n"
         "[[strategy]]\nuse = \"pipeline-parallel\"\nsize = 4\n" +
         pipeline;
}

TEST(UnevenPipeline, EndStagesTakeTheirLayersAndTheOthersShareTheRest) {
  // 18 + 22 + 22 + 18 = 80.
  Evaluation first = evaluate_paper(llama70b("first_stage_layers = 18\nlast_stage_layers = 18\n"));
  EXPECT_EQ(first.item_bytes("layers.0-17.attn.q", MEMPLAN_ROLE_WEIGHTS), 18ull * 2 * 67'108'864);
  EXPECT_NE(first.item_bytes("layers.0-17.activations", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  Evaluation last = evaluate_paper(llama70b("first_stage_layers = 18\nlast_stage_layers = 18\nstage = \"last\"\n"));
  EXPECT_EQ(last.item_bytes("layers.62-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 18ull * 2 * 67'108'864);
  // Only the first given: 17 + 21 + 21 + 21.
  Evaluation only_first = evaluate_paper(llama70b("first_stage_layers = 17\nstage = \"last\"\n"));
  EXPECT_EQ(only_first.item_bytes("layers.59-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 21ull * 2 * 67'108'864);
  // The first stage's activations scale with its layers: 18 vs the even 20.
  Evaluation even = evaluate_paper(llama70b(""));
  EXPECT_EQ(first.item_bytes("layers.0-17.activations", MEMPLAN_ROLE_ACTIVATIONS) * 20,
            even.item_bytes("layers.0-19.activations", MEMPLAN_ROLE_ACTIVATIONS) * 18);
}

// remainder (pipeline-parallel 1.7.0): where the layers go when the stages do not divide them. Llama-2-70B's
// 80 layers over 3 stages, 80 // 3 = 26 and 2 left: "ceil" gives the reported stage 27 (the most any stage
// holds); "last", vLLM before 0.8, 26 + 26 + 28 (the last partition takes the rest: vllm/distributed/utils.py
// get_pp_indices @ 145944cb9^); "before-last", vLLM from 0.8, 27 + 27 + 26 (partitions[-i] += 1 for i = 2, 3:
// PR #13839). The vllm profile sets them by version.
TEST(UnevenPipeline, RemainderPlacesTheLayersTheStagesDoNotDivide) {
  const auto stage = [](const std::string& remainder, const std::string& which) {
    return evaluate_paper(
        "name = \"pp\"\nmode = \"infer\"\n[model]\npreset = \"llama-2-70b\"\n[batch]\nmicro_batch = 1\nseq_len = 16\n"
        "[precision]\nuse = \"bf16\"\n[activations]\nuse = \"inference\"\n[[strategy]]\nuse = \"pipeline-parallel\"\n"
        "size = 3\n" + remainder + which);
  };
  const uint64_t q = 2 * 67'108'864;  // one layer's attn.q in bf16
  EXPECT_EQ(stage("", "").item_bytes("layers.0-26.attn.q", MEMPLAN_ROLE_WEIGHTS), 27 * q);
  EXPECT_EQ(stage("", "stage = \"last\"\n").item_bytes("layers.53-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 27 * q);
  const std::string last = "remainder = \"last\"\n";
  EXPECT_EQ(stage(last, "").item_bytes("layers.0-25.attn.q", MEMPLAN_ROLE_WEIGHTS), 26 * q);
  EXPECT_EQ(stage(last, "stage_rank = 1\n").item_bytes("layers.26-51.attn.q", MEMPLAN_ROLE_WEIGHTS), 26 * q);
  EXPECT_EQ(stage(last, "stage = \"last\"\n").item_bytes("layers.52-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 28 * q);
  const std::string before = "remainder = \"before-last\"\n";
  EXPECT_EQ(stage(before, "").item_bytes("layers.0-26.attn.q", MEMPLAN_ROLE_WEIGHTS), 27 * q);
  EXPECT_EQ(stage(before, "stage_rank = 1\n").item_bytes("layers.27-53.attn.q", MEMPLAN_ROLE_WEIGHTS), 27 * q);
  EXPECT_EQ(stage(before, "stage = \"last\"\n").item_bytes("layers.54-79.attn.q", MEMPLAN_ROLE_WEIGHTS), 26 * q);
  // Stages that divide the layers are the same in every mode; a rule and explicit end stages are refused.
  EXPECT_EQ(evaluate_paper(llama70b(before)).breakdown().peak, evaluate_paper(llama70b("")).breakdown().peak);
  EXPECT_NE(error_of(llama70b(before + "first_stage_layers = 18\n")).find("give one or the other"), std::string::npos);
  EXPECT_NE(error_of(llama70b("remainder = \"middle\"\n")).find("use \"ceil\", \"last\" or \"before-last\""),
            std::string::npos);
}

// The vllm profile's rule by version: Llama-3.1-8B's 32 layers over 3 stages, the last stage holds
// 10 + 2 = 12 before 0.8 (layers 20-31) and 10 from 0.8 (layers 22-31; 11 + 11 before it). One layer's
// attn.q, 4096 x 4096 in bf16: 33,554,432 bytes.
TEST(UnevenPipeline, TheVllmProfilePlacesThemByVersion) {
  const auto last_stage = [](const std::string& version) {
    return evaluate("name = \"pp\"\nmode = \"infer\"\n[framework]\nuse = \"vllm\"\nversion = \"" + version +
                    "\"\n[model]\npreset = \"llama-3.1-8b\"\n[batch]\nmicro_batch = 1\nseq_len = 16\n[precision]\n"
                    "use = \"bf16\"\n[activations]\nuse = \"inference\"\n[[strategy]]\nuse = \"pipeline-parallel\"\n"
                    "size = 3\nstage = \"last\"\n[hardware]\ngpu = \"h100-sxm-80gb\"\ncount = 3\n");
  };
  EXPECT_EQ(last_stage("0.7").item_bytes("layers.20-31.attn.q", MEMPLAN_ROLE_WEIGHTS), 12ull * 33'554'432);
  EXPECT_EQ(last_stage("0.19").item_bytes("layers.22-31.attn.q", MEMPLAN_ROLE_WEIGHTS), 10ull * 33'554'432);
}

// layout.stage_has_embedding / layout.stage_has_lm_head: the activation model
// adds the embedding dropout's mask on the first stage only and the logits on
// the last only (GPT-3 with dropout, 8 stages).
TEST(PipelineStages, StagesDeclareWhichEndTheyHold) {
  Evaluation first = evaluate_paper(gpt3(64, ""));
  EXPECT_GT(first.item_bytes("activations.embedding_dropout", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(first.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  Evaluation last = evaluate_paper(gpt3(64, "stage = \"last\"\n"));
  EXPECT_GT(last.item_bytes("activations.logits", MEMPLAN_ROLE_ACTIVATIONS), 0u);
  EXPECT_EQ(last.item_bytes("activations.embedding_dropout", MEMPLAN_ROLE_ACTIVATIONS), 0u);
}

// stage_rank: a middle stage. Llama-2-70B over 4 stages, 8 micro-batches under 1F1B: stage r holds
// min(p - r, M) micro-batches in flight (Megatron-LM's warm-up, the table in the plugin's README), so
// stage 1 holds 3 of its 20 layers' activations where the first holds 4: three quarters. Uneven, 18 + 22 +
// 22 + 18: stage 1 has layers 18-39, stage 2 layers 40-61. A middle stage holds neither the embedding nor
// the LM head.
TEST(PipelineStages, MiddleStageByRank) {
  Evaluation first = evaluate_paper(llama70b(""));
  Evaluation second = evaluate_paper(llama70b("stage_rank = 1\n"));
  EXPECT_EQ(second.item_bytes("layers.20-39.attn.q", MEMPLAN_ROLE_WEIGHTS), 20ull * 2 * 67'108'864);
  EXPECT_EQ(second.item_bytes("layers.20-39.activations", MEMPLAN_ROLE_ACTIVATIONS) * 4,
            first.item_bytes("layers.0-19.activations", MEMPLAN_ROLE_ACTIVATIONS) * 3);
  EXPECT_EQ(second.item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_EQ(second.item_bytes("lm_head", MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_NE(first.item_bytes("embed_tokens", MEMPLAN_ROLE_WEIGHTS), 0u);
  EXPECT_EQ(second.estimator().attribute_int("layout.stage_has_embedding"), 0);
  EXPECT_EQ(second.estimator().attribute_int("layout.stage_has_lm_head"), 0);
  Evaluation third = evaluate_paper(llama70b("first_stage_layers = 18\nlast_stage_layers = 18\nstage_rank = 2\n"));
  EXPECT_EQ(third.item_bytes("layers.40-61.attn.q", MEMPLAN_ROLE_WEIGHTS), 22ull * 2 * 67'108'864);
  // stage_rank = 3 is the last stage: the same as stage = "last".
  EXPECT_EQ(evaluate_paper(llama70b("stage_rank = 3\n")).breakdown().peak,
            evaluate_paper(llama70b("stage = \"last\"\n")).breakdown().peak);
}

TEST(PipelineOptions, Errors) {
  const std::string library = " (plugin library " + plugin_dir() + "/memplan-pipeline-parallel.so)";
  EXPECT_EQ(error_of(llama70b("first_stage_layers = 79\n"), "pp.toml"),
            "pp.toml:20:22: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option "
            "'first_stage_layers': first_stage_layers = 79 leaves 1 of the model's 80 layers for the other 3 stages, "
            "which must share them evenly with at least one layer each" + library);
  EXPECT_EQ(error_of(llama70b("first_stage_layers = 20\nlast_stage_layers = 21\n"), "pp.toml"),
            "pp.toml:21:21: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option "
            "'last_stage_layers': first_stage_layers = 20 and last_stage_layers = 21 leave 39 of the model's 80 "
            "layers for the other 2 stages, which must share them evenly with at least one layer each" + library);
  EXPECT_EQ(error_of(llama70b("virtual_stages = 3\n"), "pp.toml"),
            "pp.toml:20:18: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option 'virtual_stages': "
            "the first stage's 20 layers do not split into 3 model chunks of equal size; choose a divisor of the "
            "stage's layers" + library);
  EXPECT_EQ(error_of(llama70b("stage_rank = 4\n"), "pp.toml"),
            "pp.toml:20:14: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option 'stage_rank': "
            "must be a stage of the pipeline, 0 to 3 (size 4), got 4" + library);
  EXPECT_EQ(error_of(llama70b("stage = \"last\"\nstage_rank = 1\n"), "pp.toml"),
            "pp.toml:21:14: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option 'stage_rank': "
            "names the reported stage a second time; give stage or stage_rank" + library);
  EXPECT_EQ(error_of(llama70b("virtual_stages = 2\nschedule = \"gpipe\"\n"), "pp.toml"),
            "pp.toml:20:18: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option 'virtual_stages': "
            "is Megatron-LM's interleaved 1F1B schedule; it needs schedule = \"1f1b\"" + library);
  std::string one_stage = llama70b("virtual_stages = 2\n");
  one_stage.replace(one_stage.find("size = 4"), 8, "size = 1");
  EXPECT_EQ(error_of(one_stage, "pp.toml"),
            "pp.toml:20:18: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option 'virtual_stages': "
            "interleaves the stages of a pipeline; it needs size > 1" + library);
  std::string one_stage_layers = llama70b("first_stage_layers = 2\n");
  one_stage_layers.replace(one_stage_layers.find("size = 4"), 8, "size = 1");
  EXPECT_EQ(error_of(one_stage_layers, "pp.toml"),
            "pp.toml:20:22: error: in [[strategy]] #1, strategy plugin 'pipeline-parallel', option "
            "'first_stage_layers': sizes a pipeline stage; it needs size > 1" + library);
}

}  // namespace
}  // namespace memplan::testing
