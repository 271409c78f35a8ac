// collwatch_full_tmpfs MOUNTPOINT SUBDIR -- CMD ARGS...: runs CMD with a small tmpfs at
// MOUNTPOINT that is full to the last byte, SUBDIR (mode 0700) already made in it: the
// state of a /dev/shm that other programs have filled. Without root it needs an
// unprivileged user namespace (the mount lives in a private mount namespace and goes
// away with CMD); where neither works it exits 77 ("cannot set up: skip").
// Threading: single-threaded; execs CMD.
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr int kCannotSetUp = 77;

bool WriteFile(const char* path, const std::string& text) {
  const int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  return ok;
}

// A mount namespace of our own, in a user namespace of our own unless we may mount
// already. Our uid and gid keep their numbers inside.
bool EnterPrivateMountNamespace() {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  if (unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0) {
    return WriteFile("/proc/self/setgroups", "deny") &&
           WriteFile("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") &&
           WriteFile("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1");
  }
  std::fprintf(stderr, "collwatch_full_tmpfs: user namespace: %s; trying a mount namespace alone\n",
               std::strerror(errno));
  return unshare(CLONE_NEWNS) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5 || std::strcmp(argv[3], "--") != 0) {
    std::fprintf(stderr, "usage: collwatch_full_tmpfs MOUNTPOINT SUBDIR -- CMD ARGS...\n");
    return 2;
  }
  const std::string mountpoint = argv[1];
  if (!EnterPrivateMountNamespace()) {
    std::fprintf(stderr, "collwatch_full_tmpfs: cannot make a private mount namespace: %s\n", std::strerror(errno));
    return kCannotSetUp;
  }
  // Nothing mounted here may reach the parent namespace.
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", mountpoint.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=256k,mode=0700") != 0) {
    std::fprintf(stderr, "collwatch_full_tmpfs: cannot mount a tmpfs on %s: %s\n", mountpoint.c_str(),
                 std::strerror(errno));
    return kCannotSetUp;
  }
  const std::string subdir = mountpoint + "/" + argv[2];
  if (mkdir(subdir.c_str(), 0700) != 0) {
    std::perror("collwatch_full_tmpfs: mkdir");
    return 1;
  }
  // Fill it: the next page anyone asks for gets ENOSPC.
  const std::string filler = mountpoint + "/filler";
  const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::perror("collwatch_full_tmpfs: filler");
    return 1;
  }
  char block[4096] = {};
  while (write(fd, block, sizeof block) > 0) {
  }
  const int fill_error = errno;
  close(fd);
  if (fill_error != ENOSPC) {
    std::fprintf(stderr, "collwatch_full_tmpfs: filling stopped on %s, not ENOSPC\n", std::strerror(fill_error));
    return 1;
  }
  execvp(argv[4], argv + 4);
  std::fprintf(stderr, "collwatch_full_tmpfs: cannot run %s: %s\n", argv[4], std::strerror(errno));
  return 127;
}
