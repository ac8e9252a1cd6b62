package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// staleRecheck is how often status -w looks at the last status it got
// again when nothing changes, so that a controller that stopped shows as
// STALE without a change to wake it.
const staleRecheck = 30 * time.Second

// status is `rollout status NAME`: the rendered view, or the object with
// -o json|yaml|jsonpath=...; -w follows a watch until the rollout ends.
func (c *commands) status() *cobra.Command {
	var watching bool
	pf := newPrintFlags()
	cmd := &cobra.Command{
		Use:   "status NAME [-w] [-o json|yaml|jsonpath=...]",
		Short: "A rollout's progress per step, its failures and conditions; -w follows it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var printer printers.ResourcePrinter
			if pf.format() != "" {
				p, err := pf.printer(c.o.Clock.Now, false)
				if err != nil {
					return &UsageError{Err: err}
				}
				printer = p
			}
			ri, ns, err := c.rollouts()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			u, err := ri.Get(ctx, args[0], metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("ConfigRollout %s/%s not found", ns, args[0])
			}
			if err != nil {
				return fmt.Errorf("get ConfigRollout %s/%s: %w", ns, args[0], err)
			}
			v := &statusView{c: c, out: c.o.Out, printer: printer, clear: watching && printer == nil && isTerminal(c.o.Out)}
			done, err := v.show(u)
			if err != nil || !watching || done {
				return err
			}
			recheck := c.o.Clock.NewTimer(staleRecheck)
			defer recheck.Stop()
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			events := make(chan watch.Event)
			errc := make(chan error, 1)
			opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", args[0]).String()}
			go func() {
				errc <- follow(wctx, ri, opts, u.GetResourceVersion(), func(ev watch.Event) (bool, error) {
					select {
					case events <- ev:
						return false, nil
					case <-wctx.Done():
						return true, nil
					}
				})
			}()
			for {
				select {
				case <-ctx.Done():
					return nil
				case err := <-errc:
					return err
				case <-recheck.C():
					recheck.Reset(staleRecheck)
					if printer == nil {
						if _, err := v.show(v.last); err != nil {
							return err
						}
					}
				case ev := <-events:
					u, ok := ev.Object.(*unstructured.Unstructured)
					if !ok {
						continue
					}
					if ev.Type == watch.Deleted {
						_, err := fmt.Fprintf(c.o.ErrOut, "configrollout %s/%s deleted\n", ns, args[0])
						return err
					}
					done, err := v.show(u)
					if err != nil || done {
						return err
					}
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&watching, "watch", "w", false, "Follow the rollout until it ends (a watch of the API server).")
	cmd.Flags().Duration("interval", time.Second, "")
	_ = cmd.Flags().MarkDeprecated("interval", "-w follows a watch and no longer polls")
	pf.addFlags(cmd, false)
	return cmd
}

// statusView prints each new state of one rollout.
type statusView struct {
	c       *commands
	out     io.Writer
	printer printers.ResourcePrinter
	clear   bool
	last    *unstructured.Unstructured
	view    string
}

// show prints u when it differs from what was printed last (the rendered
// view, or the object's resourceVersion for -o) and reports whether the
// rollout has ended.
func (v *statusView) show(u *unstructured.Unstructured) (done bool, err error) {
	ro, err := decode(u)
	if err != nil {
		return false, err
	}
	done = !ro.Status.Phase.Active() && ro.Status.Phase != "" && !reverting(ro)
	if v.printer != nil {
		if v.last != nil && v.last.GetResourceVersion() == u.GetResourceVersion() {
			return done, nil
		}
		v.last = u
		return done, v.printer.PrintObj(u, v.out)
	}
	v.last = u
	view := RenderStatus(ro)
	if view == v.view {
		return done, nil
	}
	if v.clear {
		_, _ = io.WriteString(v.out, "\033[H\033[2J")
	} else if v.view != "" {
		_, _ = io.WriteString(v.out, "\n")
	}
	v.view = view
	_, err = io.WriteString(v.out, view)
	return done, err
}

// decode converts the dynamic client's object into a ConfigRollout.
func decode(u *unstructured.Unstructured) (*v1alpha1.ConfigRollout, error) {
	var ro v1alpha1.ConfigRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
		return nil, fmt.Errorf("decode ConfigRollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &ro, nil
}
