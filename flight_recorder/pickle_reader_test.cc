// The pickle machine on what Python's pickle module writes (protocols 0, 2, 4, 5), on a
// real Flight Recorder dump cut at every length, and on pickles of Python objects.
#include "flight_recorder/pickle_reader.h"

#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace collwatch::flight_recorder::pickle_reader_test {
namespace {

using Kind = PlainValue::Kind;
using ::testing::HasSubstr;

std::string Bytes(const char* data, size_t size) { return std::string(data, size); }
#define PICKLE(literal) Bytes(literal, sizeof(literal) - 1)

// pickle.dumps({"a": [1, -2, 300, 70000, -(2**40), 2**62], "b": (1.5, None, True, False),
//               "c": "hé"}, protocol=P)
const std::string kProtocol0 = PICKLE(
    "\x28\x64\x70\x30\x0a\x56\x61\x0a\x70\x31\x0a\x28\x6c\x70\x32\x0a\x49\x31\x0a\x61\x49\x2d\x32\x0a\x61\x49\x33"
    "\x30\x30\x0a\x61\x49\x37\x30\x30\x30\x30\x0a\x61\x4c\x2d\x31\x30\x39\x39\x35\x31\x31\x36\x32\x37\x37\x37\x36"
    "\x4c\x0a\x61\x4c\x34\x36\x31\x31\x36\x38\x36\x30\x31\x38\x34\x32\x37\x33\x38\x37\x39\x30\x34\x4c\x0a\x61\x73"
    "\x56\x62\x0a\x70\x33\x0a\x28\x46\x31\x2e\x35\x0a\x4e\x49\x30\x31\x0a\x49\x30\x30\x0a\x74\x70\x34\x0a\x73\x56"
    "\x63\x0a\x70\x35\x0a\x56\x68\xe9\x0a\x70\x36\x0a\x73\x2e");
const std::string kProtocol2 = PICKLE(
    "\x80\x02\x7d\x71\x00\x28\x58\x01\x00\x00\x00\x61\x71\x01\x5d\x71\x02\x28\x4b\x01\x4a\xfe\xff\xff\xff\x4d\x2c"
    "\x01\x4a\x70\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\xff\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40\x65\x58\x01"
    "\x00\x00\x00\x62\x71\x03\x28\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x4e\x88\x89\x74\x71\x04\x58\x01\x00\x00\x00"
    "\x63\x71\x05\x58\x03\x00\x00\x00\x68\xc3\xa9\x71\x06\x75\x2e");
const std::string kProtocol4 = PICKLE(
    "\x80\x04\x95\x4b\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x01\x61\x94\x5d\x94\x28\x4b\x01\x4a\xfe\xff\xff"
    "\xff\x4d\x2c\x01\x4a\x70\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\xff\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40"
    "\x65\x8c\x01\x62\x94\x28\x47\x3f\xf8\x00\x00\x00\x00\x00\x00\x4e\x88\x89\x74\x94\x8c\x01\x63\x94\x8c\x03\x68"
    "\xc3\xa9\x94\x75\x2e");

void ExpectTheValue(const PlainTree& tree, bool utf8) {
  const PlainValue& root = tree.at(tree.root);
  ASSERT_EQ(root.kind, Kind::kDict);
  const PlainValue* a = tree.Find(root, "a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->kind, Kind::kList);
  ASSERT_EQ(a->items.size(), 6u);
  const int64_t expected[] = {1, -2, 300, 70000, -(int64_t{1} << 40), int64_t{1} << 62};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(tree.at(a->items[i]).kind, Kind::kInt);
    EXPECT_EQ(tree.at(a->items[i]).integer, expected[i]) << i;
  }
  const PlainValue* b = tree.Find(root, "b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->kind, Kind::kTuple);
  ASSERT_EQ(b->items.size(), 4u);
  EXPECT_DOUBLE_EQ(tree.at(b->items[0]).number, 1.5);
  EXPECT_EQ(tree.at(b->items[1]).kind, Kind::kNone);
  EXPECT_EQ(tree.at(b->items[2]).kind, Kind::kBool);
  EXPECT_TRUE(tree.at(b->items[2]).boolean);
  EXPECT_FALSE(tree.at(b->items[3]).boolean);
  const PlainValue* c = tree.Find(root, "c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->text, utf8 ? "h\xc3\xa9" : "h\xe9");  // protocol 0 writes raw-unicode-escape
}

TEST(PickleReaderTest, ReadsEveryProtocolPythonWrites) {
  for (const auto& [name, bytes, utf8] : {std::tuple{"0", kProtocol0, false}, std::tuple{"2", kProtocol2, true},
                                          std::tuple{"4", kProtocol4, true}}) {
    SCOPED_TRACE(name);
    absl::StatusOr<PlainTree> tree = ReadPickle(bytes);
    ASSERT_TRUE(tree.ok()) << tree.status();
    ExpectTheValue(*tree, utf8);
  }
}

TEST(PickleReaderTest, MemoisedValuesAreOneValue) {
  // shared = {"k": 1}; pickle.dumps([shared, shared], protocol=2)
  absl::StatusOr<PlainTree> tree = ReadPickle(PICKLE(
      "\x80\x02\x5d\x71\x00\x28\x7d\x71\x01\x58\x01\x00\x00\x00\x6b\x71\x02\x4b\x01\x73\x68\x01\x65\x2e"));
  ASSERT_TRUE(tree.ok()) << tree.status();
  const PlainValue& list = tree->at(tree->root);
  ASSERT_EQ(list.items.size(), 2u);
  EXPECT_EQ(list.items[0], list.items[1]);
  EXPECT_EQ(tree->Find(tree->at(list.items[1]), "k")->integer, 1);
}

TEST(PickleReaderTest, AListHoldingItselfIsReadWithoutHarm) {
  // l = []; l.append(l); pickle.dumps(l, protocol=2)
  absl::StatusOr<PlainTree> tree = ReadPickle(PICKLE("\x80\x02\x5d\x71\x00\x68\x00\x61\x2e"));
  ASSERT_TRUE(tree.ok()) << tree.status();
  const PlainValue& list = tree->at(tree->root);
  ASSERT_EQ(list.items.size(), 1u);
  EXPECT_EQ(list.items[0], tree->root);
}

TEST(PickleReaderTest, TorchListBuildersGiveTheirList) {
  // torch::jit's pickler: torch.jit._pickle.build_intlist(([3, 4],))
  absl::StatusOr<PlainTree> tree = ReadPickle(PICKLE(
      "\x80\x02" "ctorch.jit._pickle\nbuild_intlist\n" "]\x28K\x03K\x04" "e\x85R."));
  ASSERT_TRUE(tree.ok()) << tree.status();
  const PlainValue& list = tree->at(tree->root);
  ASSERT_EQ(list.kind, Kind::kList);
  ASSERT_EQ(list.items.size(), 2u);
  EXPECT_EQ(tree->at(list.items[1]).integer, 4);
}

TEST(PickleReaderTest, PythonObjectsAreRefusedByName) {
  // pickle.dumps(collections.OrderedDict(a=1), protocol=2)
  absl::StatusOr<PlainTree> tree = ReadPickle(PICKLE(
      "\x80\x02\x63\x63\x6f\x6c\x6c\x65\x63\x74\x69\x6f\x6e\x73\x0a\x4f\x72\x64\x65\x72\x65\x64\x44\x69\x63\x74\x0a"
      "\x71\x00\x29\x52\x71\x01\x58\x01\x00\x00\x00\x61\x71\x02\x4b\x01\x73\x2e"));
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(), HasSubstr("collections.OrderedDict"));
  // os.system through REDUCE never gets as far as a call.
  tree = ReadPickle(PICKLE("\x80\x02" "cos\nsystem\n" "X\x02\x00\x00\x00id\x85R."));
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(), HasSubstr("os.system"));
  // A BUILD (object state) is beyond plain values.
  EXPECT_FALSE(ReadPickle(PICKLE("\x80\x02}b.")).ok());
}

TEST(PickleReaderTest, BadIntegersAndMemoReferencesAreErrors) {
  // LONG1 of 9 bytes: wider than 64 bits.
  absl::StatusOr<PlainTree> tree = ReadPickle(PICKLE("\x80\x02\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01."));
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(), HasSubstr("wider than 64 bits"));
  // LONG1 of 2 bytes, negative: -2.
  tree = ReadPickle(PICKLE("\x80\x02\x8a\x02\xfe\xff."));
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->at(tree->root).integer, -2);
  tree = ReadPickle(PICKLE("\x80\x02h\x07."));
  ASSERT_FALSE(tree.ok());
  EXPECT_THAT(tree.status().message(), HasSubstr("never put"));
  EXPECT_FALSE(ReadPickle(PICKLE("\x80\x02K\x01K\x02.")).ok());  // STOP leaves two values
  EXPECT_FALSE(ReadPickle(PICKLE("\x80\x02\x86.")).ok());       // TUPLE2 of an empty stack
}

TEST(PickleReaderTest, ARealDumpCutAnywhereIsAnErrorNeverACrash) {
  std::ifstream in(COLLWATCH_FR_FIXTURES "/fsdp-divergent-path/nccl_trace_rank_0", std::ios::binary);
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string bytes = whole.str();
  ASSERT_GT(bytes.size(), 1000u);
  ASSERT_TRUE(ReadPickle(bytes).ok());
  for (size_t length = 0; length < bytes.size(); ++length) {
    absl::StatusOr<PlainTree> tree = ReadPickle(std::string_view(bytes).substr(0, length));
    ASSERT_FALSE(tree.ok()) << length;
    EXPECT_THAT(tree.status().message(), HasSubstr("pickle: "));
  }
}

}  // namespace
}  // namespace collwatch::flight_recorder::pickle_reader_test
