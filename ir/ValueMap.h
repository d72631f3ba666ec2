// ValueMap<T>: a map from the ValueIds of one program to T, for the code that walks every instruction of a program
// (the verifier, DCE, CSE, the AD transformations). Semantic IR (compiler stage); depends on ir/Program.h only.
//
// Ids are small and nearly dense in practice (Builder numbers values from 0, passes leave gaps), so ids up to a
// limit index a vector: a lookup is an index, not a std::map walk with its allocation per entry, which made those
// passes spend most of their time in the allocator. An id above the limit, or a negative one (a hand-made Program),
// goes to a std::map instead, so no id makes it allocate more than a few times the size of the program.
//
//   ValueMap<Value> mapped(program);            // limit from the program's value count
//   mapped.insert_or_assign(v.id, b.add(x, y));
//   if (const Value* m = mapped.find(v.id)) ...;
//   const Value& m = mapped.at(v.id);           // asserts that the id is there
//   ValueSet live(program);                     // the same for a set of ids
#pragma once

#include "ir/Error.h"
#include "ir/Program.h"

#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace einstage {

/// The number of values (parameters and instruction results) of a program.
inline size_t value_count(const Program& program) {
  size_t n = program.params.size();
  for (const Instruction& inst : program.instructions) n += inst.results.size();
  return n;
}

template <class T> class ValueMap {
 public:
  /// Ids in [0, dense_limit) are kept in a vector (grown on demand), the rest in a std::map.
  explicit ValueMap(size_t dense_limit = 0) : limit_(dense_limit) {}
  /// Room for the ids of `program` and of about as many values again (a pass that emits new ones).
  explicit ValueMap(const Program& program) : limit_(4 * value_count(program) + 1024) {}

  T* find(ValueId id) {
    if (dense(id)) return static_cast<size_t>(id) < dense_.size() && dense_[index(id)] ? &*dense_[index(id)] : nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  const T* find(ValueId id) const { return const_cast<ValueMap*>(this)->find(id); }
  bool contains(ValueId id) const { return find(id) != nullptr; }

  /// The entry of `id`, which must be there (an internal invariant of the caller, like std::map::at).
  T& at(ValueId id) {
    T* p = find(id);
    EIN_ASSERT(p != nullptr, "value id {} has no entry", id);
    return *p;
  }
  const T& at(ValueId id) const { return const_cast<ValueMap*>(this)->at(id); }

  /// Inserts `value` when `id` has no entry; returns the entry and whether it was inserted (std::map::try_emplace).
  std::pair<T*, bool> try_emplace(ValueId id, T value) {
    if (T* p = find(id)) return {p, false};
    return {&assign(id, std::move(value)), true};
  }
  T& insert_or_assign(ValueId id, T value) {
    if (T* p = find(id)) return *p = std::move(value);
    return assign(id, std::move(value));
  }
  /// The entry of `id`, value-initialised when there was none (std::map::operator[]).
  T& operator[](ValueId id) {
    if (T* p = find(id)) return *p;
    return assign(id, T{});
  }
  void erase(ValueId id) {
    if (dense(id)) {
      if (static_cast<size_t>(id) < dense_.size()) dense_[index(id)].reset();
    } else {
      sparse_.erase(id);
    }
  }

 private:
  bool dense(ValueId id) const { return id >= 0 && static_cast<size_t>(id) < limit_; }
  static size_t index(ValueId id) { return static_cast<size_t>(id); }
  T& assign(ValueId id, T value) {
    if (!dense(id)) return sparse_.insert_or_assign(id, std::move(value)).first->second;
    if (index(id) >= dense_.size()) dense_.resize(std::min(limit_, std::max(index(id) + 1, 2 * dense_.size())));
    return dense_[index(id)].emplace(std::move(value));
  }

  size_t limit_;
  std::vector<std::optional<T>> dense_;
  std::map<ValueId, T> sparse_;
};

/// A set of ValueIds of one program, on ValueMap.
class ValueSet {
 public:
  explicit ValueSet(size_t dense_limit = 0) : map_(dense_limit) {}
  explicit ValueSet(const Program& program) : map_(program) {}
  /// True when `id` was not in the set.
  bool insert(ValueId id) { return map_.try_emplace(id, true).second; }
  bool contains(ValueId id) const { return map_.contains(id); }
  void erase(ValueId id) { map_.erase(id); }

 private:
  ValueMap<bool> map_;
};

}  // namespace einstage
