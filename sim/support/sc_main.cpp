// libsystemc.so brings a main() that calls sc_main. Programs that use the
// simulator have their own main, so this is never called; libsystemc.so only
// needs the symbol to link, and libneuronsim.so defines it once for everyone.
extern "C" int sc_main(int, char*[]) {
  return 1;
}
