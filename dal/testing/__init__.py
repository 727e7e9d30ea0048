"""`dal test`: workflow tests written in DAL.

A test script is a DAL script (named `*.test.dal`) run in a fresh temporary workspace with a few extra
builtins (`assert`, `assert_eq`, `fake`, `invoke`, `approve`, `deny`, `resolve`, `resume`, `receipt`) that exist only
under `dal test`. `invoke` runs a workflow script through the real runner (policy, journal, store,
receipts) and hands its run receipt back as a DAL map, so a test asserts on what an operator would see.
See docs/testing.md.
"""

from dal.testing.harness import TEST_BUILTINS, TestResult, discover, run_test_file

__all__ = ["TEST_BUILTINS", "TestResult", "discover", "run_test_file"]
