// libsystemc.so brings a main() that calls sc_main. Programs that link the
// simulator have their own main, so this is never called; the shared library
// only needs the symbol to link. It is compiled into each program (an
// INTERFACE source of neuronsim::sim) because nothing else would pull it out of
// a static library.
extern "C" int sc_main(int, char*[]) { return 1; }
