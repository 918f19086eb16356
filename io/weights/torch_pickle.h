// io/weights/torch_pickle.h: the data.pkl of a torch.save archive, read by a restricted unpickler that understands
// only what torch.save writes for a state dict of tensors, and runs nothing.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "io/weights/dtype.h"

namespace kascade {

/// One tensor of a state dict, as torch._utils._rebuild_tensor_v2 would rebuild it: a contiguous view of a storage,
/// whose bytes are the archive entry data/<storage_key>.
struct TorchTensorRecord {
    DType dtype = DType::F32;
    std::vector<std::int64_t> shape;
    std::vector<std::int64_t> strides;  ///< in elements; row-major contiguous (others are refused)
    std::string storage_key;
    std::int64_t storage_offset = 0;  ///< in elements
    std::int64_t storage_numel = 0;   ///< elements of the whole storage, as its persistent id declares

    std::int64_t numel() const;
};

/// Reads `pickle`, the data.pkl of a torch.save archive holding a dict (or collections.OrderedDict) of tensors, into
/// name -> record. Only pickle protocol 2's opcodes for tuples, dicts, ints, strings, booleans, None, the memo,
/// BINPERSID, REDUCE and BUILD are read, and only the globals collections.OrderedDict, torch._utils._rebuild_tensor_v2
/// and torch.FloatStorage / HalfStorage / BFloat16Storage may appear; persistent ids must be ('storage', type, key,
/// location, numel). Anything else (another opcode or global, a value that is not a tensor, a non-contiguous tensor, a
/// view reaching past its storage) is refused with a kascade::Error naming `where`, the opcode or global and its byte
/// offset. Nothing named in the file is ever called.
std::map<std::string, TorchTensorRecord> read_torch_pickle(std::span<const std::uint8_t> pickle,
                                                           const std::string& where);

}  // namespace kascade
