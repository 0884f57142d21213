// 'freeze': train only part of the model; everything else is frozen (no
// gradient, no master copy, no optimizer state: the precision and optimizer
// plugins skip weights without MEMPLAN_ITEM_TRAINABLE).
//
//   train          which parts train: a comma-separated list of "layers",
//                  "attention", "mlp", "experts", "router", "norms",
//                  "embeddings", "lm_head", "all"
//   layers         which layers: "0-5", "0-5,28-31", "7" (inclusive ranges)
//   first_layers   shorthand: the N layers nearest the input (0 .. N-1)
//   last_layers    shorthand: the N layers nearest the output
//   experts        experts per layer that train (the first N of each layer)
//
// Layered items (one item with a count of layers) are cut into runs of
// trained and frozen layers; a trained MoE expert item is cut into the
// trained experts ("<name>.trained") and the frozen rest (its own name).
// Adapter items (class adapter, added by e.g. 'lora') are never touched. The
// plugin sets the flag of every other weight, so it composes with 'lora' by
// order: after 'lora' it makes the listed base parts train fully next to the
// adapters (PEFT's modules_to_save); before 'lora', 'lora' freezes them again.
#include <memplan/sdk.hpp>
#include <memplan/support/comma_list.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace sdk = memplan::sdk;
using sdk::ParamClass;

constexpr std::array<memplan_option_spec, 5> kOptions{{
    {"train", MEMPLAN_OPTION_STRING,
     "parts that train, comma-separated: layers, attention, mlp, experts, router, norms, embeddings, lm_head, all",
     "\"layers\" when a layer or expert selection is given; otherwise required", nullptr},
    {"layers", MEMPLAN_OPTION_STRING, "layers whose selected parts train: inclusive ranges such as \"0-5\" or \"0-5,30-31\"",
     "all layers", nullptr},
    {"first_layers", MEMPLAN_OPTION_INT, "train the N layers nearest the input (layers 0 to N-1)", "all layers",
     nullptr},
    {"last_layers", MEMPLAN_OPTION_INT, "train the N layers nearest the output (layers L-N to L-1)", "all layers",
     nullptr},
    {"experts", MEMPLAN_OPTION_INT, "MoE experts per trained layer that train (1 to the model's experts)",
     "all experts", nullptr},
}};

// Parts of the model a scenario can name, as bits.
enum Part : uint32_t {
  kAttention = 1u << 0,
  kMlp = 1u << 1,
  kExperts = 1u << 2,
  kRouter = 1u << 3,
  kNorms = 1u << 4,
  kEmbeddings = 1u << 5,
  kLmHead = 1u << 6,
  kLayers = 1u << 7,  // every weight that belongs to a layer
  kAll = 0xffu,
};

struct PartName {
  std::string_view name;
  uint32_t bits;
};

constexpr std::array<PartName, 9> kParts{{
    {"layers", kLayers},
    {"attention", kAttention},
    {"mlp", kMlp},
    {"experts", kExperts},
    {"router", kRouter},
    {"norms", kNorms},
    {"embeddings", kEmbeddings},
    {"lm_head", kLmHead},
    {"all", kAll},
}};

constexpr const char* kPartList = "layers, attention, mlp, experts, router, norms, embeddings, lm_head, all";

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

using memplan::support::parse_index;

// The parts an item belongs to.
uint32_t parts_of(const sdk::ItemRef& item) {
  uint32_t bits = item.layer() >= 0 ? kLayers : 0u;
  switch (item.param_class()) {
    case ParamClass::attention:
    case ParamClass::attention_kv:
    case ParamClass::attention_latent: return bits | kAttention;
    case ParamClass::mlp: return bits | kMlp;
    case ParamClass::expert: return bits | kExperts;
    case ParamClass::router: return bits | kRouter;
    case ParamClass::norm:
    case ParamClass::final_norm: return bits | kNorms;
    case ParamClass::embedding:
    case ParamClass::position_embedding: return bits | kEmbeddings;
    case ParamClass::lm_head: return bits | kLmHead;
    default: return bits;
  }
}

class FreezeStrategy {
 public:
  static constexpr sdk::PluginInfo info{"freeze", "1.0.2",
                                        "Train only some layers, experts, the router or the embeddings; freeze the rest",
                                        sdk::Kind::strategy, sdk::Phase::trainability};
  static std::span<const memplan_option_spec> options() { return kOptions; }

  explicit FreezeStrategy(sdk::Options& options) {
    const memplan_model& model = options.model();
    if (!options.training())
      options.fail("decides which weights train, but mode = \"infer\" trains nothing; remove this [[strategy]] or "
                   "set mode = \"train\"");
    if (!model.has_architecture)
      options.fail("needs the model's architecture (layers, experts, embeddings) but the scenario gives only "
                   "params; use a preset or an inline architecture in [model]");
    layers_ = model.layers;
    model_experts_ = model.experts;

    const std::optional<std::string> layers = options.string("layers");
    const std::optional<int64_t> first = options.integer("first_layers");
    const std::optional<int64_t> last = options.integer("last_layers");
    const std::optional<int64_t> experts = options.integer("experts");
    const int selections = (layers ? 1 : 0) + (first ? 1 : 0) + (last ? 1 : 0);
    if (selections > 1)
      options.fail(layers ? "layers" : "first_layers",
                   "layers, first_layers and last_layers each select the trained layers; give only one of them");

    const std::optional<std::string> train = options.string("train");
    if (train) {
      train_ = parse_parts(options, *train, model);
    } else if (selections > 0 || experts) {
      train_ = kLayers;
    } else {
      options.fail("needs to know what trains: set train (e.g. train = \"router\" or \"embeddings,lm_head\") "
                   "and/or the layers (layers = \"0-5\", first_layers = N or last_layers = N)");
    }

    trained_layer_.assign(static_cast<size_t>(layers_), selections == 0);
    if (layers) parse_layers(options, *layers);
    if (first) select_end(options, "first_layers", *first, false);
    if (last) select_end(options, "last_layers", *last, true);
    if (selections > 0 && (train_ & (kLayers | kAttention | kMlp | kExperts | kRouter | kNorms)) == 0)
      options.fail(layers ? "layers" : (first ? "first_layers" : "last_layers"),
                   "selects layers, but train = \"" + *train +
                       "\" names no part inside the layers (layers, attention, mlp, experts, router, norms)");

    trained_experts_ = model_experts_;
    if (experts) {
      if (model_experts_ == 0)
        options.fail("experts", "selects MoE experts, but the model is dense (no [model.moe] experts)");
      if (*experts < 1 || *experts > model_experts_)
        options.fail("experts", "must be between 1 and the model's " + std::to_string(model_experts_) +
                                    " experts per layer, got " + std::to_string(*experts));
      if ((train_ & (kLayers | kExperts)) == 0)
        options.fail("experts", "selects experts, but train = \"" + *train +
                                    "\" does not train them; add \"experts\" (or \"layers\") to train");
      trained_experts_ = *experts;
    }
  }

  void apply(sdk::Context& ctx) {
    // Items are edited where they lie; the pieces beyond the first of each are
    // appended after every item present before, in the order met: collected
    // in batch_ (kept between evaluations) and added in one call.
    batch_.clear();
    for (sdk::ItemRef item : ctx.items()) {
      if (item.role() != sdk::Role::weights || item.param_class() == ParamClass::adapter) continue;
      // "all" also takes weights no part names (e.g. BERT's pooler, class other).
      const bool selected = train_ == kAll || (parts_of(item) & train_) != 0;
      if (!selected || item.layer() < 0 || item.count() == 0) {
        item.set_trainable(selected);
        continue;
      }
      // Cut the layer range into runs of trained and frozen layers; the first
      // run replaces the item in place (so it keeps the lowest layer first).
      memplan_item original = item.raw();  // the item as it came, while its place is overwritten
      bool in_place = true;
      const int64_t end = static_cast<int64_t>(original.layer) + original.count;
      for (int64_t run = original.layer; run < end;) {
        const bool trained = trained_at(run);
        int64_t stop = run + 1;
        while (stop < end && trained_at(stop) == trained) ++stop;
        memplan_item piece = original;
        sdk::ItemRef edit(&piece);
        edit.set_layer(static_cast<int32_t>(run));
        edit.set_count(static_cast<uint32_t>(stop - run));
        edit.set_trainable(trained);
        emit(ctx, item, sdk::ItemRef(&original), in_place, piece);
        run = stop;
      }
    }
    ctx.add(batch_);
  }

 private:
  bool trained_at(int64_t layer) const {
    return layer >= 0 && layer < layers_ && trained_layer_[static_cast<size_t>(layer)];
  }

  // Writes one run; a trained expert run is cut into its trained experts and the frozen rest.
  void emit(const sdk::Context& ctx, sdk::ItemRef target, const sdk::ItemRef& original, bool& in_place,
            memplan_item piece) {
    sdk::ItemRef edit(&piece);
    if (edit.trainable() && edit.param_class() == ParamClass::expert && trained_experts_ < model_experts_ &&
        model_experts_ > 0) {
      const double per_expert = edit.elements() / static_cast<double>(model_experts_);
      memplan_item frozen = piece;
      sdk::ItemRef frozen_edit(&frozen);
      frozen_edit.set_trainable(false);
      frozen_edit.set_elements(per_expert * static_cast<double>(model_experts_ - trained_experts_));
      edit.set_name(trained_(ctx, original));  // "<name>.trained", interned once per name
      edit.set_elements(per_expert * static_cast<double>(trained_experts_));
      put(target, in_place, piece);
      put(target, in_place, frozen);
      return;
    }
    put(target, in_place, piece);
  }

  void put(sdk::ItemRef target, bool& in_place, memplan_item& item) {
    if (in_place) {
      target.raw() = item;  // `item` is a copy of target's, struct_size included
      in_place = false;
    } else {
      batch_.copy_of(sdk::ItemRef(&item));
    }
  }

  static uint32_t parse_parts(sdk::Options& options, const std::string& text, const memplan_model& model) {
    uint32_t bits = 0;
    for (std::string_view field : memplan::support::comma_fields(text)) {
      const PartName* found = nullptr;
      for (const PartName& part : kParts)
        if (part.name == field) found = &part;
      if (found == nullptr)
        options.fail("train", "has \"" + std::string(field) + "\", not a part of the model; use " + kPartList +
                                  " (comma-separated)");
      // A part the model does not have would silently train nothing.
      if (found->bits == kMlp && model.experts > 0)
        options.fail("train", "has \"mlp\", but the model's MLPs are MoE experts; use \"experts\" (and "
                              "\"router\" for the gate)");
      if ((found->bits == kExperts || found->bits == kRouter) && model.experts == 0)
        options.fail("train", "has \"" + std::string(field) +
                                  "\", but the model is dense (no [model.moe] experts); use \"mlp\"");
      if (found->bits == kLmHead && model.tied_embeddings)
        options.fail("train", "has \"lm_head\", but the model ties its LM head to the token embedding; use "
                              "\"embeddings\"");
      bits |= found->bits;
    }
    return bits;
  }

  void parse_layers(sdk::Options& options, const std::string& text) {
    for (std::string_view field : memplan::support::comma_fields(text)) {
      const size_t dash = field.find('-');
      const std::optional<int64_t> from = parse_index(trim(field.substr(0, dash)));
      const std::optional<int64_t> to =
          dash == std::string_view::npos ? from : parse_index(trim(field.substr(dash + 1)));
      if (!from || !to || *to < *from)
        options.fail("layers", "has \"" + std::string(field) +
                                   "\"; give layer numbers or inclusive ranges such as \"0-5\" or \"0-5,30-31\"");
      if (*to >= layers_)
        options.fail("layers", "has \"" + std::string(field) + "\", but the model's layers are 0 to " +
                                   std::to_string(layers_ - 1));
      for (int64_t layer = *from; layer <= *to; ++layer) trained_layer_[static_cast<size_t>(layer)] = true;
    }
  }

  void select_end(sdk::Options& options, const char* key, int64_t n, bool from_top) {
    if (n < 1 || n > layers_)
      options.fail(key, "must be between 1 and the model's " + std::to_string(layers_) + " layers, got " +
                            std::to_string(n));
    for (int64_t k = 0; k < n; ++k) trained_layer_[static_cast<size_t>(from_top ? layers_ - 1 - k : k)] = true;
  }

  uint32_t train_ = 0;
  int64_t layers_ = 0;
  int64_t model_experts_ = 0;
  int64_t trained_experts_ = 0;
  std::vector<bool> trained_layer_;
  sdk::SuffixedNames trained_{".trained"};
  sdk::ItemBatch batch_;  // the pieces appended, cleared each evaluation, its capacity kept
};

}  // namespace

MEMPLAN_PLUGIN(FreezeStrategy)
