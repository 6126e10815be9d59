// Package debpkg gives agentwire's tests real programs to run against:
// nginx as a load balancer, redis-server as the store a fleet shares.
// They come from Debian's packages. A program already installed (on PATH,
// or where its package installs it) is used as it is; otherwise its
// package, and the packages named beside it, are fetched with
// `apt-get download` and unpacked with `dpkg-deb -x` into a cache of the
// tests' own (the user's cache directory, under agentwire-test/PACKAGE/
// VERSION), never installed system-wide: no root, no service started, no
// file outside the cache written. The cache is keyed by the package's
// version, filled in one rename (concurrent test binaries find it whole
// or not at all) and shared by every later run.
//
// A test on a machine without apt-get is skipped (the program cannot be
// had); one whose fetch fails fails.
//
// Binary finds or fetches a program; StartRedis runs a redis-server of
// one test's own on a free port, which the test may stop, kill, pause and
// start again.
package debpkg
