"""Frames taken apart (analyze/load/frames.py): the forms stacks.jsonl and the folded files
write, and demangled C++ names, whose spaces and parentheses are their own."""
from analyze.load.frames import frame_function, frame_parts


def test_frames_are_named_as_pprof_shows_functions():
    assert frame_parts("epoll_wait+0x13 (libc.so.6)") == ("epoll_wait", "libc.so.6")
    assert frame_parts("__schedule+0x618") == ("__schedule", "")
    assert frame_parts("do_epoll_wait_[k]") == ("do_epoll_wait", "[kernel]")
    assert frame_parts("[unknown] (libc.so.6+0x8a0)") == ("[unknown] libc.so.6+0x8a0",
                                                          "libc.so.6")
    assert frame_parts("ngx_http_process_request") == ("ngx_http_process_request", "")


def test_demangled_names_keep_their_spaces_and_parentheses():
    f = "std::vector<int, std::allocator<int> >::push_back(int const&)+0x1a (app)"
    assert frame_parts(f) == ("std::vector<int, std::allocator<int> >::push_back(int const&)",
                              "app")
    f = "std::function<void ()>::operator()() const+0x2f (libfoo.so)"
    assert frame_function(f) == "std::function<void ()>::operator()() const"
    assert frame_function("(anonymous namespace)::run(int)+0x8 (app)") == \
        "(anonymous namespace)::run(int)"
    assert frame_function("core::fmt::write+0x4 (rustapp)") == "core::fmt::write"


def test_unnamed_frames_name_no_function():
    assert frame_function("[unknown] (libc.so.6+0x8a0)") == "[unknown]"
    assert frame_function("[unknown] (0x7f3a0000)") == "[unknown]"
    assert frame_function("epoll_wait+0x13 (libc.so.6)") == "epoll_wait"
