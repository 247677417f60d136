# tests of coll
