package pluginhost

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"

	"github.com/capgate/capgate/internal/nodump"
)

// RunAs is the user a plugin's process runs as, instead of the host's.
type RunAs struct {
	// User is the setting as written, for messages.
	User string
	// UID and GID are the process's user and group.
	UID, GID uint32
	// Groups are its supplementary groups: the user's, none for a bare
	// uid:gid.
	Groups []uint32
}

func (r *RunAs) String() string {
	return fmt.Sprintf("%s (uid %d, gid %d)", r.User, r.UID, r.GID)
}

// ParseRunAs resolves a run_as setting: a user name or a numeric uid, which
// must both be in the user database (it gives the group and supplementary
// groups), or uid:gid, taken as it is. Only Linux can start a plugin so.
func ParseRunAs(s string) (*RunAs, error) {
	if !runAsSupported {
		return nil, errors.New("starting a plugin as another user is supported on Linux only; remove run_as")
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("must name a user, a uid or uid:gid")
	}
	if u, g, ok := strings.Cut(s, ":"); ok {
		uid, uerr := parseID(u)
		gid, gerr := parseID(g)
		if uerr != nil || gerr != nil {
			return nil, fmt.Errorf("%q is not uid:gid (two numbers)", s)
		}
		return &RunAs{User: s, UID: uid, GID: gid}, nil
	}
	var (
		u   *user.User
		err error
	)
	if _, nerr := parseID(s); nerr == nil {
		u, err = user.LookupId(s)
	} else {
		u, err = user.Lookup(s)
	}
	if err != nil {
		var unknownName user.UnknownUserError
		var unknownID user.UnknownUserIdError
		if errors.As(err, &unknownName) || errors.As(err, &unknownID) {
			return nil, fmt.Errorf("no user %q on this system (a uid missing from the user database needs its group: uid:gid)", s)
		}
		return nil, fmt.Errorf("look up user %q: %w", s, err)
	}
	r := &RunAs{User: s}
	if r.UID, err = parseID(u.Uid); err != nil {
		return nil, fmt.Errorf("user %q has uid %q, not a number", s, u.Uid)
	}
	if r.GID, err = parseID(u.Gid); err != nil {
		return nil, fmt.Errorf("user %q has gid %q, not a number", s, u.Gid)
	}
	// Without its supplementary groups the process would still run, with
	// less access than the user has; that is no reason to refuse it.
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := parseID(id); err == nil && g != r.GID {
				r.Groups = append(r.Groups, g)
			}
		}
	}
	return r, nil
}

func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, err
	}
	return uint32(n), nil
}

// checkRunAs refuses a run_as the host cannot honour. Only root may start
// a process as another user; refusing at start-up says so, where the
// kernel's EPERM at fork would not.
func checkRunAs(s Spec) error { return checkRunAsBy(s, os.Geteuid()) }

// checkRunAsBy is checkRunAs for a host running as uid.
func checkRunAsBy(s Spec, uid int) error {
	if s.RunAs == nil {
		return nil
	}
	if !runAsSupported {
		return fmt.Errorf("%s.run_as: starting a plugin as another user is supported on Linux only", s.where())
	}
	if uid != 0 {
		return fmt.Errorf("%s.run_as: only a host running as root can start a plugin as %s; this host runs as uid %d (remove run_as, or start capgate as root)",
			s.where(), s.RunAs, uid)
	}
	return nil
}

// hideOnce makes the host not dumpable before its first plugin starts, for
// a host that did not do it itself (its tests, an embedding program).
var hideOnce sync.Once

func hideFromPlugins(log *slog.Logger) {
	hideOnce.Do(func() {
		if err := nodump.Set(); err != nil {
			log.Warn("plugins running as the host's user can read its environment", "err", err)
		}
	})
}
