"""Calls python_frames' test library from Python functions of known names and lines and
prints what it captured (read by interposer/python_frames_test.cc, which finds the lines
by their `# at:` markers). Usage: python_frames_calls.py LIBRARY [frames|unready|cost [CAPTURES]]."""
import ctypes
import sys
import threading

LIBRARY = sys.argv[1]
MODE = sys.argv[2] if len(sys.argv) > 2 else "frames"
CAPTURES = int(sys.argv[3]) if len(sys.argv) > 3 else 1000000  # cost: how many captures to time
BUFFER_SIZE = 1 << 16


def load(kind):
    lib = kind(LIBRARY)
    lib.collwatch_test_python_frames.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.collwatch_test_python_frames.restype = ctypes.c_int
    lib.collwatch_test_python_version.restype = ctypes.c_int
    lib.collwatch_test_capture_ns.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
    lib.collwatch_test_capture_ns.restype = ctypes.c_double
    return lib


class Outer:
    def method(self, lib, buffer):
        return lib.collwatch_test_python_frames(buffer, BUFFER_SIZE)  # at: method


def inner_function(lib, buffer):
    return Outer().method(lib, buffer)  # at: inner


def outer_function(lib, buffer):
    return inner_function(lib, buffer)  # at: outer


def größe(lib, buffer):
    return outer_function(lib, buffer)  # at: latin1


def 函数(lib, buffer):
    return größe(lib, buffer)  # at: cjk


def report(case, lib, entry):
    buffer = ctypes.create_string_buffer(BUFFER_SIZE)
    count = entry(lib, buffer)  # at: report
    print(f"case {case} {count}")
    sys.stdout.write(buffer.value.decode("utf-8", "replace"))
    print("end")


def in_thread(lib):
    report("thread", lib, outer_function)  # at: thread


def deep(lib, depth):
    if depth > 0:
        return deep(lib, depth - 1)
    frames = ctypes.c_int(0)
    ns = lib.collwatch_test_capture_ns(CAPTURES, ctypes.byref(frames))
    print(f"cost {ns:.1f} ns for {frames.value} frames")


def main():
    cdll = load(ctypes.CDLL)
    pydll = load(ctypes.PyDLL)
    if MODE == "cost":
        report("warmup", cdll, outer_function)
        deep(cdll, 40 - 3)
        return
    report("cdll", cdll, outer_function)  # at: main-cdll
    if MODE == "unready":
        return
    report("pydll", pydll, outer_function)  # at: main-pydll
    report("unicode", cdll, 函数)  # at: main-unicode
    thread = threading.Thread(target=in_thread, args=(cdll,))
    thread.start()
    thread.join()
    print(f"version {cdll.collwatch_test_python_version()}")


main()  # at: module
