# tests of launcher
