"""Frames taken apart (analyze/load/frames.py): the forms stacks.jsonl and the folded files
write, and demangled C++ names, whose spaces and parentheses are their own."""
from analyze.load.frames import frame_function, frame_parts, is_jit_frame, jit_stack_count


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


def test_jit_frames_are_those_named_from_a_perf_map():
    assert is_jit_frame("JS:*handleRequest /srv/app.js:7:3+0x1c (perf-4242.map)")
    assert is_jit_frame("void Orders$Handler.handle(com.sun.net.httpserver.HttpExchange)+0x27dc "
                        "(perf-17.map)")
    assert not is_jit_frame("uv_fs_fsync+0xb4 (node)")
    assert not is_jit_frame("[unknown] (0x7f3fa5809c0c)")
    assert jit_stack_count({("offcpu", 1): ["a+0x1 (perf-1.map)", "main+0x2 (x)"],
                            ("offcpu", 2): ["main+0x2 (x)"]}) == 1
