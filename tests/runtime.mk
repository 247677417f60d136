# tests of runtime
