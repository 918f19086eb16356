// io/weights/torch_pickle.cpp: the restricted unpickler of torch.save's data.pkl (protocol 2, a state dict).
//
// The pickle is interpreted as a small stack machine over plain values; a global is looked up in a table of the five
// names a state dict of tensors uses, and "calling" one (REDUCE) builds the value torch would build, so the file can
// name nothing that would run. Opcodes are those Python's pickle module defines (Lib/pickle.py).
#include "io/weights/torch_pickle.h"

#include <cstring>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "io/weights/safetensors.h"

namespace kascade {
namespace {

// The globals a torch.save state dict names.
enum class Global { OrderedDict, RebuildTensor, FloatStorage, HalfStorage, BFloat16Storage };

struct GlobalName {
    std::string_view module;
    std::string_view name;
    Global global;
};

constexpr GlobalName kGlobals[] = {
    {"collections", "OrderedDict", Global::OrderedDict},
    {"torch._utils", "_rebuild_tensor_v2", Global::RebuildTensor},
    {"torch", "FloatStorage", Global::FloatStorage},
    {"torch", "HalfStorage", Global::HalfStorage},
    {"torch", "BFloat16Storage", Global::BFloat16Storage},
};

constexpr const char* kAllowedGlobals =
    "collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch.FloatStorage, torch.HalfStorage and "
    "torch.BFloat16Storage";

enum class Kind { None, Bool, Int, String, Tuple, Dict, Global, Storage, Tensor };

std::string_view kind_name(Kind kind) {
    switch (kind) {
        case Kind::None:
            return "None";
        case Kind::Bool:
            return "a boolean";
        case Kind::Int:
            return "an integer";
        case Kind::String:
            return "a string";
        case Kind::Tuple:
            return "a tuple";
        case Kind::Dict:
            return "a dict";
        case Kind::Global:
            return "a global";
        case Kind::Storage:
            return "a storage";
        case Kind::Tensor:
            return "a tensor";
    }
    return "?";
}

struct Value;
using Items = std::vector<Value>;
using Dict = std::vector<std::pair<std::shared_ptr<const std::string>, Value>>;  // in insertion order

// One value of the pickle machine. Tuples and tensors are immutable and shared by the memo and the stack. A dict is
// mutable (SETITEMS fills it after BINPUT memoised it), so the stack and the memo share it; inside a tuple or as a
// dict value it is kept only as its size at that moment, which is all torch.save's nested dicts need to be checked
// for, and which makes reference cycles impossible.
struct Value {
    Kind kind = Kind::None;
    std::int64_t integer = 0;                 ///< Int, Bool; Storage: numel; Dict inside a container: its size
    std::shared_ptr<const std::string> text;  ///< String; Storage: key (shared: a memoised string is reused freely)
    Global global = Global::OrderedDict;
    DType dtype = DType::F32;  ///< Storage
    std::shared_ptr<const Items> items;
    std::shared_ptr<Dict> dict;  ///< a Dict on the stack or in the memo
    std::shared_ptr<const TorchTensorRecord> tensor;
    int depth = 0;  ///< nesting of tuples
};

// Tuples nest this deep at most in a state dict (a tensor's shape inside its argument tuple); the bound keeps
// recursive destruction shallow whatever the file holds.
constexpr int kMaxDepth = 16;

Value of_kind(Kind kind) {
    Value v;
    v.kind = kind;
    return v;
}
Value scalar(Kind kind, std::int64_t integer) {
    Value v = of_kind(kind);
    v.integer = integer;
    return v;
}
Value string(std::string_view text) {
    Value v = of_kind(Kind::String);
    v.text = std::make_shared<const std::string>(text);
    return v;
}
Value empty_dict() {
    Value v = of_kind(Kind::Dict);
    v.dict = std::make_shared<Dict>();
    return v;
}

Value contained(Value value) {
    if (value.kind == Kind::Dict && value.dict != nullptr) {
        value.integer = static_cast<std::int64_t>(value.dict->size());
        value.dict.reset();
    }
    return value;
}

class Unpickler {
  public:
    Unpickler(std::span<const std::uint8_t> bytes, const std::string& where) : bytes_(bytes), where_(where) {}

    // Runs to STOP and returns the state dict.
    Dict run() {
        while (true) {
            op_at_ = pos_;
            const std::uint8_t op = take_byte();
            switch (op) {
                case 0x80: {  // PROTO
                    const int version = take_byte();
                    check(op_at_ == 0, "PROTO after the start of the pickle");
                    check(version <= 2, "pickle protocol {} (torch.save writes protocol 2)", version);
                    break;
                }
                case '.': {  // STOP
                    check(marks_.empty() && stack_.size() == 1, "STOP with {} values and {} marks on the stack",
                          stack_.size(), marks_.size());
                    check(stack_[0].kind == Kind::Dict && stack_[0].dict != nullptr,
                          "the pickle holds {}, not a state dict (a dict of tensors)", kind_name(stack_[0].kind));
                    check(pos_ == bytes_.size(), "{} bytes follow STOP", bytes_.size() - pos_);
                    return std::move(*stack_[0].dict);
                }
                case '(':  // MARK
                    marks_.push_back(stack_.size());
                    break;
                case 'N':  // NONE
                    push({});
                    break;
                case 0x88:  // NEWTRUE
                case 0x89:  // NEWFALSE
                    push(scalar(Kind::Bool, op == 0x88));
                    break;
                case 'J':  // BININT
                    push(scalar(Kind::Int, static_cast<std::int32_t>(take_le(4))));
                    break;
                case 'K':  // BININT1
                    push(scalar(Kind::Int, take_le(1)));
                    break;
                case 'M':  // BININT2
                    push(scalar(Kind::Int, take_le(2)));
                    break;
                case 0x8a: {  // LONG1: n bytes of two's complement
                    const int n = take_byte();
                    check(n <= 8, "LONG1 of {} bytes (at most 8 fit an int64)", n);
                    std::uint64_t bits = take_le(n);
                    if (n > 0 && n < 8 && (bits >> (8 * n - 1)) != 0) bits |= ~std::uint64_t{0} << (8 * n);
                    push(scalar(Kind::Int, static_cast<std::int64_t>(bits)));
                    break;
                }
                case 'X': {  // BINUNICODE
                    const std::size_t n = take_le(4);
                    push(string(take(n)));
                    break;
                }
                case 'c':  // GLOBAL
                    push(global());
                    break;
                case ')':  // EMPTY_TUPLE
                    push(tuple({}));
                    break;
                case 't':  // TUPLE
                    push(tuple(pop_to_mark()));
                    break;
                case 0x85:    // TUPLE1
                case 0x86:    // TUPLE2
                case 0x87: {  // TUPLE3
                    Items items(op - 0x84);
                    for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop();
                    push(tuple(std::move(items)));
                    break;
                }
                case '}':  // EMPTY_DICT
                    push(empty_dict());
                    break;
                case 's': {  // SETITEM
                    Value value = pop();
                    Value key = pop();
                    set_item(std::move(key), std::move(value));
                    break;
                }
                case 'u': {  // SETITEMS
                    Items items = pop_to_mark();
                    check(items.size() % 2 == 0, "SETITEMS with an odd number ({}) of keys and values", items.size());
                    for (std::size_t i = 0; i < items.size(); i += 2)
                        set_item(std::move(items[i]), std::move(items[i + 1]));
                    break;
                }
                case 'q':  // BINPUT
                    memo_[static_cast<std::uint32_t>(take_le(1))] = top();
                    break;
                case 'r':  // LONG_BINPUT
                    memo_[static_cast<std::uint32_t>(take_le(4))] = top();
                    break;
                case 'h':  // BINGET
                    push(memo(take_le(1)));
                    break;
                case 'j':  // LONG_BINGET
                    push(memo(take_le(4)));
                    break;
                case 'Q':  // BINPERSID
                    push(storage(pop()));
                    break;
                case 'R': {  // REDUCE
                    Value args = pop();
                    Value callable = pop();
                    push(reduce(callable, args));
                    break;
                }
                case 'b': {  // BUILD: the attributes of the object below; a state dict's are its _metadata, unused
                    const Value state = pop();
                    check(top().kind == Kind::Dict && top().dict != nullptr && state.kind == Kind::Dict,
                          "BUILD of {} with {} (torch.save sets only a dict's attributes, from a dict)",
                          kind_name(top().kind), kind_name(state.kind));
                    break;
                }
                default:
                    fail("opcode 0x{:02x}{} is not one torch.save writes for a state dict of tensors", op,
                         op >= 0x20 && op < 0x7f ? fmt::format(" ('{}')", static_cast<char>(op)) : std::string());
            }
        }
    }

  private:
    template <typename... Args>
    [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
        KASCADE_FAIL("{}: byte {}: {}", where_, op_at_, fmt::format(format, std::forward<Args>(args)...));
    }
    template <typename... Args>
    void check(bool holds, fmt::format_string<Args...> format, Args&&... args) const {
        if (!holds) fail(format, std::forward<Args>(args)...);
    }

    std::string_view take(std::size_t n) {
        check(n <= bytes_.size() - pos_, "the pickle ends inside an opcode (it is truncated)");
        const std::string_view s(reinterpret_cast<const char*>(bytes_.data()) + pos_, n);
        pos_ += n;
        return s;
    }
    std::uint8_t take_byte() { return static_cast<std::uint8_t>(take(1)[0]); }
    std::uint64_t take_le(int n) {
        const std::string_view s = take(static_cast<std::size_t>(n));
        std::uint64_t v = 0;
        for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(s[i]);
        return v;
    }
    std::string_view take_line() {
        const std::size_t end =
            std::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size()).find('\n', pos_);
        check(end != std::string_view::npos, "the pickle ends inside a GLOBAL (it is truncated)");
        const std::string_view line = take(end - pos_);
        pos_ += 1;
        return line;
    }

    void push(Value value) { stack_.push_back(std::move(value)); }
    std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
    const Value& top() const {
        check(stack_.size() > fence(), "the stack is empty");
        return stack_.back();
    }
    Value pop() {
        check(stack_.size() > fence(), "the stack is empty");
        Value v = std::move(stack_.back());
        stack_.pop_back();
        return v;
    }
    Items pop_to_mark() {
        check(!marks_.empty(), "no MARK to collect values up to");
        Items items(std::make_move_iterator(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back())),
                    std::make_move_iterator(stack_.end()));
        stack_.resize(marks_.back());
        marks_.pop_back();
        return items;
    }
    Value memo(std::uint64_t index) const {
        const auto it = memo_.find(static_cast<std::uint32_t>(index));
        check(it != memo_.end(), "memo entry {} is read before it is written", index);
        return it->second;
    }

    Value tuple(Items items) const {
        int depth = 0;
        for (Value& item : items) {
            item = contained(std::move(item));
            depth = std::max(depth, item.depth);
        }
        check(depth < kMaxDepth, "tuples nested more than {} deep", kMaxDepth);
        Value v = of_kind(Kind::Tuple);
        v.items = std::make_shared<const Items>(std::move(items));
        v.depth = depth + 1;
        return v;
    }

    Value global() {
        const std::string module(take_line());
        const std::string name(take_line());
        for (const GlobalName& g : kGlobals) {
            if (g.module != module || g.name != name) continue;
            Value v = of_kind(Kind::Global);
            v.global = g.global;
            return v;
        }
        fail("global {}.{} is not allowed (a state dict of tensors names only {})", module, name, kAllowedGlobals);
    }

    void set_item(Value key, Value value) {
        check(top().kind == Kind::Dict && top().dict != nullptr, "SETITEM on {}, not a dict", kind_name(top().kind));
        check(key.kind == Kind::String, "a dict key is {}, not a string", kind_name(key.kind));
        top().dict->emplace_back(std::move(key.text), contained(std::move(value)));
    }

    // A persistent id: ('storage', storage type, key, location, numel), as torch.save's persistent_id writes it.
    Value storage(const Value& pid) const {
        check(pid.kind == Kind::Tuple && pid.items->size() == 5, "a persistent id is {}{}, expected a tuple of 5",
              kind_name(pid.kind), pid.kind == Kind::Tuple ? fmt::format(" of {}", pid.items->size()) : "");
        const Items& t = *pid.items;
        check(t[0].kind == Kind::String && *t[0].text == "storage", "a persistent id does not start with 'storage'");
        check(t[1].kind == Kind::Global && t[1].global != Global::OrderedDict && t[1].global != Global::RebuildTensor,
              "a persistent id's storage type is not a storage global ({})", kAllowedGlobals);
        check(t[2].kind == Kind::String && t[3].kind == Kind::String,
              "a persistent id's key and location must be strings");
        check(t[4].kind == Kind::Int && t[4].integer >= 0, "a persistent id's element count must be an integer >= 0");
        const DType dtype = t[1].global == Global::FloatStorage  ? DType::F32
                            : t[1].global == Global::HalfStorage ? DType::F16
                                                                 : DType::BF16;
        Value v = scalar(Kind::Storage, t[4].integer);
        v.text = t[2].text;
        v.dtype = dtype;
        return v;
    }

    std::vector<std::int64_t> ints(const Value& tuple, const char* what) const {
        check(tuple.kind == Kind::Tuple, "a tensor's {} is {}, expected a tuple", what, kind_name(tuple.kind));
        std::vector<std::int64_t> values;
        for (const Value& v : *tuple.items) {
            check(v.kind == Kind::Int && v.integer >= 0, "a tensor's {} holds {}, expected integers >= 0", what,
                  kind_name(v.kind));
            values.push_back(v.integer);
        }
        return values;
    }

    Value reduce(const Value& callable, const Value& args) const {
        check(callable.kind == Kind::Global, "REDUCE calls {}, not a global", kind_name(callable.kind));
        check(args.kind == Kind::Tuple, "REDUCE with {} as arguments, not a tuple", kind_name(args.kind));
        const Items& a = *args.items;
        if (callable.global == Global::OrderedDict) {
            check(a.empty(), "collections.OrderedDict called with {} arguments (torch.save passes none)", a.size());
            return empty_dict();
        }
        check(callable.global == Global::RebuildTensor, "a storage type is called");
        // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks)
        check(a.size() == 6, "torch._utils._rebuild_tensor_v2 called with {} arguments, expected 6", a.size());
        check(a[0].kind == Kind::Storage, "a tensor's storage is {}", kind_name(a[0].kind));
        check(a[1].kind == Kind::Int && a[1].integer >= 0, "a tensor's storage offset is not an integer >= 0");
        check(a[4].kind == Kind::Bool, "a tensor's requires_grad is {}, not a boolean", kind_name(a[4].kind));
        check(a[5].kind == Kind::Dict && a[5].integer == 0, "a tensor's backward hooks are not an empty dict");
        auto record = std::make_shared<TorchTensorRecord>();
        record->dtype = a[0].dtype;
        record->storage_key = *a[0].text;
        record->storage_numel = a[0].integer;
        record->storage_offset = a[1].integer;
        record->shape = ints(a[2], "size");
        record->strides = ints(a[3], "stride");
        check(record->shape.size() == record->strides.size(), "a tensor has {} sizes but {} strides",
              record->shape.size(), record->strides.size());
        Value v = of_kind(Kind::Tensor);
        v.tensor = std::move(record);
        return v;
    }

    std::span<const std::uint8_t> bytes_;
    const std::string& where_;
    std::size_t pos_ = 0;
    std::size_t op_at_ = 0;  ///< the offset of the opcode being run
    std::vector<Value> stack_;
    std::vector<std::size_t> marks_;
    std::unordered_map<std::uint32_t, Value> memo_;
};

// The checks that need a tensor's name: contiguity and its extent inside the storage, which every tensor viewing
// the same storage must declare alike.
void check_tensor(const std::string& where, const std::string& name, const TorchTensorRecord& t,
                  std::map<std::string, const TorchTensorRecord*>& storages) {
    constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;
    std::int64_t numel = 1;
    for (const std::int64_t d : t.shape) {
        KASCADE_CHECK(d <= kMaxElements && (d == 0 || numel <= kMaxElements / d),
                      "{}: tensor {} has shape {}, more than 2^48 elements", where, name, shape_string(t.shape));
        numel *= d;
    }
    std::int64_t expected = 1;
    for (std::size_t i = t.shape.size(); i-- > 0;) {
        // A dimension of extent 1 may have any stride (torch's is_contiguous ignores it too).
        KASCADE_CHECK(numel == 0 || t.shape[i] == 1 || t.strides[i] == expected,
                      "{}: tensor {} has shape {} and strides {}: not contiguous, which kascade does not read (save "
                      "it after .contiguous())",
                      where, name, shape_string(t.shape), shape_string(t.strides));
        expected *= t.shape[i];
    }
    KASCADE_CHECK(t.storage_offset <= t.storage_numel && numel <= t.storage_numel - t.storage_offset,
                  "{}: tensor {} ({} elements from element {}) reaches past the end of its storage {} ({} elements)",
                  where, name, numel, t.storage_offset, t.storage_key, t.storage_numel);
    const auto [it, inserted] = storages.emplace(t.storage_key, &t);
    KASCADE_CHECK(inserted || (it->second->dtype == t.dtype && it->second->storage_numel == t.storage_numel),
                  "{}: tensor {} declares its storage {} as {} elements of {}, another tensor as {} of {}", where, name,
                  t.storage_key, t.storage_numel, dtype_name(t.dtype), it->second->storage_numel,
                  dtype_name(it->second->dtype));
}

}  // namespace

std::int64_t TorchTensorRecord::numel() const {
    std::int64_t n = 1;
    for (const std::int64_t d : shape) n *= d;
    return n;
}

std::map<std::string, TorchTensorRecord> read_torch_pickle(std::span<const std::uint8_t> pickle,
                                                           const std::string& where) {
    const Dict state = Unpickler(pickle, where).run();
    std::map<std::string, TorchTensorRecord> tensors;
    std::map<std::string, const TorchTensorRecord*> storages;
    for (const auto& [key, value] : state) {
        const std::string& name = *key;
        KASCADE_CHECK(value.kind == Kind::Tensor, "{}: entry {} of the state dict is {}, not a tensor", where, name,
                      kind_name(value.kind));
        const auto [it, inserted] = tensors.emplace(name, *value.tensor);
        KASCADE_CHECK(inserted, "{}: tensor {} appears twice", where, name);
        check_tensor(where, name, it->second, storages);
    }
    return tensors;
}

}  // namespace kascade
