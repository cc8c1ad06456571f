// Package nodump keeps a process's environment and memory from the other
// processes of its user. The host holds every plugin's secrets in its
// environment and each plugin holds its own; a plugin running as the same
// user could otherwise read them from /proc/<pid>/environ or attach to the
// process.
package nodump
