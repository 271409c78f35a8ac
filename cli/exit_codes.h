// The exit statuses of every `collwatch` command, in one place: the commands return them
// and their --help shows ExitStatusHelp. Threading: constants.
#ifndef COLLWATCH_CLI_EXIT_CODES_H_
#define COLLWATCH_CLI_EXIT_CODES_H_

namespace collwatch {

// Every command but `run`: 0 all is well (healthy, same schedule), 1 the answer is "no"
// (findings or not healthy, a changed schedule, differences), 2 bad usage or input it
// cannot read.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFindings = 1;
inline constexpr int kExitBadInput = 2;

// `collwatch run` exits with its command's status (128 + N when signal N ended it). Its
// own outcomes use statuses from the range that timeout(1) and env(1) made familiar,
// which a training job does not exit with by itself, so a script can tell them apart.
inline constexpr int kExitRunNotHealthy = 123;   // --fail-on-findings: the command exited 0, the run is not healthy
inline constexpr int kExitStoppedHungJob = 124;  // --kill-on-hang stopped the job (as timeout(1) does)
inline constexpr int kExitRunFailed = 125;       // collwatch run itself failed: bad option, nothing started
// 126 and 127, as a shell: the command was found but could not run / was not found.

inline constexpr const char* kAnalysisExitHelp =
    "Exit status: 0 healthy or unchanged, 1 findings, not healthy or changed, 2 bad usage or unreadable input.";
inline constexpr const char* kToolExitHelp = "Exit status: 0 done, 2 bad usage or input, 1 the work failed.";
inline constexpr const char* kRunExitHelp =
    "Exit status: the command's own (128+N when signal N ended it); 123 with --fail-on-findings when it exited 0 "
    "but the run is not healthy; 124 when --kill-on-hang stopped it; 125 when collwatch run itself failed (bad "
    "option, nothing started); 126/127 when the command could not be run / was not found.";

}  // namespace collwatch

#endif  // COLLWATCH_CLI_EXIT_CODES_H_
