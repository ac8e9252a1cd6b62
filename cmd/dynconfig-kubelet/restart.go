package main

import (
	"context"
	"fmt"
	"os/exec"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/dynconfig/dynconfig"
)

// systemdRestarter restarts a unit through systemd's D-Bus API
// (org.freedesktop.systemd1.Manager.RestartUnit, mode "replace"), and waits
// for the job: systemd runs the unit's ExecStartPre (the pre-start role)
// and starts the kubelet again.
type systemdRestarter struct{ unit string }

func (r systemdRestarter) Restart(ctx context.Context) error {
	conn, err := sddbus.NewWithContext(ctx)
	if err != nil {
		return fmt.Errorf("connect to systemd over D-Bus: %w", err)
	}
	defer conn.Close()
	done := make(chan string, 1)
	if _, err := conn.RestartUnitContext(ctx, r.unit, "replace", done); err != nil {
		return fmt.Errorf("restart %s: %w", r.unit, err)
	}
	select {
	case result := <-done:
		if result != "done" {
			return fmt.Errorf("restart %s: job %s", r.unit, result)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("restart %s: %w", r.unit, ctx.Err())
	}
}

// commandRestarter runs a command that restarts the kubelet, for hosts
// without systemd: /bin/sh -c COMMAND.
type commandRestarter struct{ command string }

func (r commandRestarter) Restart(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, "/bin/sh", "-c", r.command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("restart command %q: %w: %s", r.command, err, out)
	}
	return nil
}

var (
	_ dynconfig.Restarter = systemdRestarter{}
	_ dynconfig.Restarter = commandRestarter{}
)
