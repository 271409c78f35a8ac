// python_frames: in this process (no Python) nothing is found; in Python interpreters of
// each version found at configure time, tests/interposer/python_frames_calls.py calls the
// test library from functions of known names and lines, with and without the GIL and from
// a thread, and the frames it prints must be exactly those.
#include "interposer/python_frames.h"

#include <stdio.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace collwatch {
namespace {

TEST(PythonFrames, NoInterpreterInThisProcess) {
  const char* why = nullptr;
  EXPECT_FALSE(PythonFramesReady(&why));
  ASSERT_NE(why, nullptr);
  EXPECT_STREQ(why, "no Python interpreter in this process");
  EXPECT_FALSE(PythonFramesReady(&why)) << "idempotent";
  EXPECT_STREQ(why, "no Python interpreter in this process");
  RawPythonFrame frames[4];
  EXPECT_EQ(CapturePythonFrames(frames, 4), 0u);
  EXPECT_EQ(PythonVersion(), 0);
  char file[16];
  char function[16];
  int32_t line = 7;
  EXPECT_FALSE(DescribePythonFrame(RawPythonFrame{0, -1}, file, sizeof file, function, sizeof function, &line));
  EXPECT_EQ(line, 0);
}

struct Interpreter {
  int version;  // 311
  std::string path;
};

// COLLWATCH_TEST_PYTHONS: "311=/usr/bin/python3,312=/path/python3.12" (set by CMake).
std::vector<Interpreter> Interpreters() {
  std::vector<Interpreter> found;
  std::stringstream list(COLLWATCH_TEST_PYTHONS);
  std::string entry;
  while (std::getline(list, entry, ',')) {
    const size_t equals = entry.find('=');
    if (equals == std::string::npos) continue;
    found.push_back({std::stoi(entry.substr(0, equals)), entry.substr(equals + 1)});
  }
  return found;
}

struct Frame {
  std::string file;
  std::string function;
  int line = 0;
};

struct Case {
  int count = -1;
  std::vector<Frame> frames;
  std::string unready;  // the why, when not ready
};

struct ScriptRun {
  std::map<std::string, Case> cases;
  std::string output;
  int status = -1;
};

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) parts.push_back(part);
  return parts;
}

ScriptRun RunScript(const Interpreter& python, const std::string& setting, const char* mode) {
  std::string command = "env";
  if (!setting.empty()) command += " COLLWATCH_PYTHON_FRAMES=" + setting;
  if (std::string(COLLWATCH_SANITIZER_RUNTIME).size() > 0) {
    command += " LD_PRELOAD=" COLLWATCH_SANITIZER_RUNTIME " ASAN_OPTIONS=detect_leaks=0";
  }
  command += " " + python.path + " " COLLWATCH_TEST_PYTHON_SCRIPT " " COLLWATCH_TEST_PYTHON_LIBRARY " " +
             mode + " 2>&1";
  ScriptRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, pipe)) > 0) run.output.append(chunk, got);
  run.status = pclose(pipe);
  Case* current = nullptr;
  for (const std::string& line : Split(run.output, '\n')) {
    if (line.rfind("case ", 0) == 0) {
      const std::vector<std::string> words = Split(line, ' ');
      if (words.size() != 3) continue;
      current = &run.cases[words[1]];
      current->count = std::stoi(words[2]);
    } else if (line == "end") {
      current = nullptr;
    } else if (current != nullptr) {
      const std::vector<std::string> fields = Split(line, '\t');
      if (fields.size() == 2 && fields[0] == "unready") {
        current->unready = fields[1];
      } else if (fields.size() == 3) {
        current->frames.push_back({fields[0], fields[1], std::stoi(fields[2])});
      }
    }
  }
  return run;
}

// The line of the script that carries "# at: <marker>".
int MarkerLine(const std::string& marker) {
  std::ifstream script(COLLWATCH_TEST_PYTHON_SCRIPT);
  std::string text;
  for (int number = 1; std::getline(script, text); ++number) {
    const size_t at = text.find("# at: ");
    if (at != std::string::npos && text.substr(at + 6) == marker) return number;
  }
  ADD_FAILURE() << "no marker " << marker;
  return -1;
}

class PythonFramesInPython : public testing::TestWithParam<Interpreter> {
 protected:
  void SetUp() override {
    if (access(GetParam().path.c_str(), X_OK) != 0) GTEST_SKIP() << GetParam().path << " is absent";
  }

  // The expected frame for `function` calling at `marker`; 3.10 has no qualified names.
  Frame At(const std::string& function, const std::string& marker) const {
    std::string name = function;
    if (GetParam().version < 311 && name.find('.') != std::string::npos) name = name.substr(name.rfind('.') + 1);
    return {COLLWATCH_TEST_PYTHON_SCRIPT, name, MarkerLine(marker)};
  }

  static void ExpectFrames(const Case& got, const std::vector<Frame>& expected, bool exact) {
    ASSERT_GE(got.frames.size(), expected.size());
    if (exact) {
      EXPECT_EQ(got.frames.size(), expected.size());
    }
    EXPECT_EQ(static_cast<size_t>(got.count), got.frames.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(got.frames[i].file, expected[i].file) << "frame " << i;
      EXPECT_EQ(got.frames[i].function, expected[i].function) << "frame " << i;
      EXPECT_EQ(got.frames[i].line, expected[i].line) << "frame " << i << " (" << expected[i].function << ")";
    }
  }
};

TEST_P(PythonFramesInPython, CapturesNamesAndLinesWithAndWithoutTheGil) {
  const ScriptRun run = RunScript(GetParam(), "", "frames");
  ASSERT_EQ(run.status, 0) << run.output;
  ASSERT_EQ(run.cases.count("cdll"), 1u) << run.output;
  const std::vector<Frame> through = {At("Outer.method", "method"), At("inner_function", "inner"),
                                      At("outer_function", "outer"), At("report", "report")};
  std::vector<Frame> cdll = through;
  cdll.push_back(At("main", "main-cdll"));
  cdll.push_back(At("<module>", "module"));
  ExpectFrames(run.cases.at("cdll"), cdll, true);
  EXPECT_NE(run.output.find("version " + std::to_string(GetParam().version)), std::string::npos) << run.output;

  std::vector<Frame> pydll = through;
  pydll.push_back(At("main", "main-pydll"));
  pydll.push_back(At("<module>", "module"));
  ExpectFrames(run.cases.at("pydll"), pydll, true);

  std::vector<Frame> unicode(through.begin(), through.begin() + 3);
  unicode.push_back(At("gr\xc3\xb6\xc3\x9f" "e", "latin1"));
  unicode.push_back(At("\xe5\x87\xbd\xe6\x95\xb0", "cjk"));
  unicode.push_back(At("report", "report"));
  unicode.push_back(At("main", "main-unicode"));
  unicode.push_back(At("<module>", "module"));
  ExpectFrames(run.cases.at("unicode"), unicode, true);

  std::vector<Frame> thread = through;
  thread.push_back(At("in_thread", "thread"));
  ExpectFrames(run.cases.at("thread"), thread, false);
  const Case& in_thread = run.cases.at("thread");
  ASSERT_GT(in_thread.frames.size(), thread.size());
  const std::string& threading = in_thread.frames[thread.size()].file;
  EXPECT_EQ(threading.substr(threading.size() - 12), "threading.py") << threading;
}

TEST_P(PythonFramesInPython, OffSettingCapturesNothing) {
  const ScriptRun run = RunScript(GetParam(), "off", "unready");
  ASSERT_EQ(run.status, 0) << run.output;
  ASSERT_EQ(run.cases.count("cdll"), 1u) << run.output;
  EXPECT_EQ(run.cases.at("cdll").count, 0);
  EXPECT_EQ(run.cases.at("cdll").unready, "switched off (COLLWATCH_PYTHON_FRAMES=off)");
}

TEST_P(PythonFramesInPython, UnsupportedVersionCapturesNothing) {
  const ScriptRun run = RunScript(GetParam(), "pretend-unsupported", "unready");
  ASSERT_EQ(run.status, 0) << run.output;
  ASSERT_EQ(run.cases.count("cdll"), 1u) << run.output;
  EXPECT_EQ(run.cases.at("cdll").count, 0);
  const int version = GetParam().version;
  EXPECT_EQ(run.cases.at("cdll").unready, "CPython " + std::to_string(version / 100) + "." +
                                              std::to_string(version % 100) +
                                              ": layout unknown, no call paths "
                                              "(COLLWATCH_PYTHON_FRAMES=pretend-unsupported)");
}

// The warm path's cost at a depth of about 40 frames (printed; the bound is loose, for
// sanitizer and debug builds).
TEST_P(PythonFramesInPython, CaptureCost) {
  // A million captures give the figure. Under a sanitizer it would time the instrumentation
  // (30 s a version under TSan), so a thousand there only check the 40 frames.
  const bool sanitized = std::string(COLLWATCH_SANITIZER_RUNTIME).size() > 0;
  const ScriptRun run = RunScript(GetParam(), "", sanitized ? "cost 1000" : "cost 1000000");
  ASSERT_EQ(run.status, 0) << run.output;
  const size_t at = run.output.find("cost ");
  ASSERT_NE(at, std::string::npos) << run.output;
  std::printf("CPython %d: %s", GetParam().version, run.output.substr(at).c_str());
  EXPECT_NE(run.output.find("for 40 frames"), std::string::npos) << run.output;
}

INSTANTIATE_TEST_SUITE_P(Interpreters, PythonFramesInPython, testing::ValuesIn(Interpreters()),
                         [](const testing::TestParamInfo<Interpreter>& param) {
                           return "CPython" + std::to_string(param.param.version);
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PythonFramesInPython);

}  // namespace
}  // namespace collwatch
