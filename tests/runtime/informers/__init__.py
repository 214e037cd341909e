"""Tests of the shared informers: reflector, store and indexes, informer handlers, factory."""
