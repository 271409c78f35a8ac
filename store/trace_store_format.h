// The trace store's on-disk format: the specification, in comments and constants. One
// folder per rank stream; written by the collector (trace_store.h), read by the collector
// on restart and by the post-mortem tools. Threading: constants only.
#ifndef COLLWATCH_STORE_TRACE_STORE_FORMAT_H_
#define COLLWATCH_STORE_TRACE_STORE_FORMAT_H_

#include <cstdint>

namespace collwatch::store {

// Layout of an output folder (`collwatch collector --out DIR`, `collwatch run --out DIR`):
//
//   DIR/<job>/rank-<RANK>.<host>.<pid>.<start_realtime_ns>/trace.cwlog   the log
//                                                         /trace.cwidx   its index
//
// trace.cwlog, append-only:
//
//   +----------------------------+
//   | FileHeader (16 bytes)      |  kLogMagic, kVersion, 0
//   +----------------------------+
//   | frame: u32 length          |  little endian: bytes of payload
//   |        u32 crc32c          |  CRC-32C (Castagnoli) of the payload
//   |        payload             |  a serialized collwatch.v1.StoreRecord
//   +----------------------------+
//   | frame ...                  |
//
// The first frame holds the rank's identity; then events (one frame per accepted batch,
// duplicates removed), region names, and status changes, in arrival order. Each lane's
// events appear in increasing position (store/event_codec.h), each position once:
// the collector drops what it already stores, which is what makes resends after a
// reconnect, an agent restart or a collector restart harmless.
//
// Durability: the collector acknowledges a batch after its frame was written with one
// write(2) (it survives a crash of the collector process; with --fsync also a crash of
// the machine: fdatasync before the ack).
//
// Crash recovery, on open for appending: frames are checked in order. A frame cut short
// (its header or payload runs past the end of the file), or the last frame of the file
// failing its checksum, is a torn tail: the file is truncated there. A frame that fails
// its checksum and is followed by more data is damage, not a crash: opening fails with
// DATA_LOSS and the file is left as it is. Readers stop at a torn tail without changing
// the file.
//
// trace.cwidx: the same header (kIndexMagic) and framing, each payload a
// collwatch.v1.StoreIndexEntry: for one events frame its offset, length, positions per
// lane and sequence numbers per communicator, so a reader seeks to a communicator's
// sequence number without decoding the log, and the writer finds its resume points
// without decoding events. The index is derived data: entries for log frames it lacks are
// rebuilt from the log on open, entries past the log's end are ignored.

inline constexpr uint64_t kLogMagic = 0x31474f4c45434154ull;    // "TACELOG1" little-endian
inline constexpr uint64_t kIndexMagic = 0x3158444945434154ull;  // "TACEIDX1" little-endian
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kFileHeaderBytes = 16;
inline constexpr uint32_t kFrameHeaderBytes = 8;
// Larger frames are damage (the collector's batches are bounded well below this).
inline constexpr uint32_t kMaxFramePayloadBytes = 256u << 20;

// First payload byte of each StoreRecord kind (its protobuf field tag), so a scan tells
// frames apart without decoding them.
inline constexpr uint8_t kTagIdentity = (1 << 3) | 2;
inline constexpr uint8_t kTagEvents = (2 << 3) | 2;
inline constexpr uint8_t kTagRegion = (3 << 3) | 2;
inline constexpr uint8_t kTagStatus = (4 << 3) | 2;
inline constexpr uint8_t kTagCallPath = (5 << 3) | 2;
inline constexpr uint8_t kTagStacks = (6 << 3) | 2;

inline constexpr char kLogFileName[] = "trace.cwlog";
inline constexpr char kIndexFileName[] = "trace.cwidx";

}  // namespace collwatch::store

#endif  // COLLWATCH_STORE_TRACE_STORE_FORMAT_H_
