// zb-h1's split backward: the parting nodes, B with their gradients kept, W from them (see
// split_backward.h).
#include "pipeline/split_backward.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace gpttrain {

using torch::autograd::AccumulateGrad;
using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;

// A node that computes gradients both for the input's path and for weights only it leads to (a
// matmul, a layer norm, a bias add), with the weights' edges W must reach from it.
struct PartingNode {
  std::shared_ptr<Node> node;
  edge_list weights;      // (AccumulateGrad, 0) of each weight reached only through this node
  variable_list grads;    // what B delivered to the node's inputs
  int delivered_at = -1;  // order of delivery in B: W runs in the same order, as a backward would
  // The boundary's own node (a non-leaf boundary with weights beneath it, like the first stage's
  // embedding): B's result is its gradient, at this input slot of the node; no hook.
  int boundary_slot = -1;
};

struct SplitBackwardState {
  std::vector<PartingNode> parting;
  bool splittable = false;
  bool capturing = true;
  int deliveries = 0;
};

namespace {

// Keeps the gradients a parting node receives during B (and only B: W runs the node again).
class KeepDelivered : public torch::autograd::FunctionPreHook {
 public:
  KeepDelivered(std::weak_ptr<SplitBackwardState> state, size_t index)
      : state_(std::move(state)), index_(index) {}
  variable_list operator()(const variable_list& grads) override {
    if (auto state = state_.lock(); state && state->capturing) {
      PartingNode& parting = state->parting[index_];
      parting.grads = grads;
      parting.delivered_at = state->deliveries++;
    }
    return grads;
  }

 private:
  std::weak_ptr<SplitBackwardState> state_;
  size_t index_;
};

struct Reach {
  bool input = false;   // leads to the stage input's gradient
  bool weight = false;  // leads to some weight's AccumulateGrad
};

// Which of input and weights each node of the graph under `root` leads to (iterative post-order:
// a stage's graph is thousands of nodes deep in long chains).
std::unordered_map<const Node*, Reach> reachability(const std::shared_ptr<Node>& root,
                                                    const Node* input_node) {
  std::unordered_map<const Node*, Reach> reach;
  std::vector<std::pair<Node*, size_t>> stack{{root.get(), 0}};
  reach.emplace(root.get(), Reach{});
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    const bool terminal = node == input_node || dynamic_cast<AccumulateGrad*>(node) != nullptr;
    if (!terminal && next < node->num_outputs()) {
      const Edge& edge = node->next_edge(next++);
      if (edge.is_valid() && reach.emplace(edge.function.get(), Reach{}).second) {
        stack.emplace_back(edge.function.get(), 0);
      }
      continue;
    }
    Reach r;
    if (node == input_node) {
      r.input = true;
    } else if (terminal) {
      r.weight = true;
    } else {
      for (const Edge& edge : node->next_edges()) {
        if (!edge.is_valid()) continue;
        const Reach& child = reach.at(edge.function.get());
        r.input |= child.input;
        r.weight |= child.weight;
      }
    }
    reach[node] = r;
    stack.pop_back();
  }
  return reach;
}

// Gives parting node `index` the subgraph under `todo` that `follow` admits, collecting the
// (AccumulateGrad, 0) edge of each weight in it. Returns false when a node of it already belongs
// to another parting node: W would run that node twice (and fire its weight's hooks twice).
template <typename Follow>
bool claimWeights(std::vector<Node*> todo, size_t index, Follow follow,
                  std::unordered_map<const Node*, size_t>& owner, edge_list& weights) {
  bool alone = true;
  while (!todo.empty()) {
    Node* n = todo.back();
    todo.pop_back();
    auto [it, fresh] = owner.emplace(n, index);
    if (!fresh) {
      alone &= it->second == index;
      continue;
    }
    if (dynamic_cast<AccumulateGrad*>(n) != nullptr) {
      weights.emplace_back(n->shared_from_this(), 0);
      continue;
    }
    for (const Edge& edge : n->next_edges()) {
      if (edge.is_valid() && follow(edge.function.get())) todo.push_back(edge.function.get());
    }
  }
  return alone;
}

}  // namespace

SplitBackward::SplitBackward(const at::Tensor& output, const at::Tensor& input)
    : state_(std::make_shared<SplitBackwardState>()) {
  if (!input.defined() || !output.grad_fn()) return;
  const Edge input_edge = torch::autograd::impl::gradient_edge(input);
  if (!input_edge.is_valid()) return;
  const std::shared_ptr<Node> root = output.grad_fn();
  Node* boundary = input_edge.function.get();
  const auto reach = reachability(root, boundary);
  if (!reach.at(root.get()).input) return;

  // Each weight-only node belongs to the one parting node it hangs from; a second owner means the
  // graph is not split.
  std::unordered_map<const Node*, size_t> owner;
  bool shared = false;
  const auto leadsToWeight = [&reach](const Node* n) { return reach.at(n).weight; };
  for (const auto& [const_node, r] : reach) {
    if (!r.input || const_node == boundary) continue;
    Node* node = const_cast<Node*>(const_node);  // NOLINT: the graph is ours to hook
    std::vector<Node*> weight_only;
    for (const Edge& edge : node->next_edges()) {
      if (edge.is_valid() && !reach.at(edge.function.get()).input &&
          leadsToWeight(edge.function.get())) {
        weight_only.push_back(edge.function.get());
      }
    }
    if (weight_only.empty()) continue;
    edge_list weights;
    shared |= !claimWeights(std::move(weight_only), state_->parting.size(), leadsToWeight, owner,
                            weights);
    state_->parting.push_back(PartingNode{node->shared_from_this(), std::move(weights), {}, -1});
  }
  // A non-leaf boundary: the weights beneath it (the first stage's embedding tables) are W's too,
  // started from the boundary's gradient, which B computes anyway. Below the boundary nothing was
  // reached, so every edge is followed.
  if (dynamic_cast<AccumulateGrad*>(boundary) == nullptr) {
    edge_list weights;
    shared |= !claimWeights(
        {boundary}, state_->parting.size(), [](const Node*) { return true; }, owner, weights);
    if (!weights.empty()) {
      state_->parting.push_back(PartingNode{boundary->shared_from_this(),
                                            std::move(weights),
                                            {},
                                            -1,
                                            static_cast<int>(input_edge.input_nr)});
    }
  }
  if (shared || state_->parting.empty()) {
    state_->parting.clear();
    return;
  }
  for (size_t i = 0; i < state_->parting.size(); ++i) {
    if (state_->parting[i].boundary_slot >= 0) continue;
    state_->parting[i].node->add_pre_hook(std::make_unique<KeepDelivered>(state_, i));
  }
  state_->splittable = true;
}

SplitBackward::~SplitBackward() = default;

at::Tensor SplitBackward::backwardInput(const at::Tensor& output, const at::Tensor& seed,
                                        const at::Tensor& input) {
  at::Tensor grad = torch::autograd::grad({output}, {input}, {seed}, /*retain_graph=*/true)[0];
  state_->capturing = false;
  for (PartingNode& parting : state_->parting) {
    if (parting.boundary_slot >= 0) {  // the last gradient B computes: W's last start too
      parting.grads.assign(parting.node->num_inputs(), at::Tensor());
      parting.grads[parting.boundary_slot] = grad;
      parting.delivered_at = state_->deliveries++;
    }
    // B runs every node on the input's path; one it did not reach cannot start W.
    if (parting.delivered_at < 0) state_->splittable = false;
  }
  return grad;
}

bool SplitBackward::backwardWeight() {
  if (!state_->splittable) return false;
  std::vector<PartingNode*> order;
  for (PartingNode& parting : state_->parting) order.push_back(&parting);
  std::sort(order.begin(), order.end(), [](const PartingNode* a, const PartingNode* b) {
    return a->delivered_at < b->delivered_at;
  });
  auto& engine = torch::autograd::Engine::get_default_engine();
  for (PartingNode* parting : order) {
    edge_list roots;
    variable_list grads;
    for (size_t i = 0; i < parting->grads.size(); ++i) {
      if (!parting->grads[i].defined()) continue;
      roots.emplace_back(parting->node, static_cast<uint32_t>(i));
      grads.push_back(parting->grads[i]);
    }
    if (!roots.empty()) {
      // Only the edges to this node's weights are needed, so the node computes their gradients
      // and not its input's again; accumulate_grad runs the AccumulateGrad nodes and their hooks.
      engine.execute(roots, grads, /*keep_graph=*/true, /*create_graph=*/false,
                     /*accumulate_grad=*/true, parting->weights);
    }
    parting->grads.clear();  // the kept gradients are W's memory cost: free each when used
  }
  return true;
}

size_t SplitBackward::partingNodes() const {
  return state_->splittable ? state_->parting.size() : 0;
}

}  // namespace gpttrain
