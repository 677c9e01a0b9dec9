from gevent import monkey


def test_tests_run_under_the_monkey_patched_runtime():
    assert monkey.is_module_patched("socket")
    assert monkey.is_module_patched("os")
