package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
	"github.com/dynconfig/dynconfig/rollout/plan"
)

// list is `rollout list` (all rollouts of the namespace, or of every
// namespace with -A) and `rollout get NAME...`: kubectl get's table and -o.
func (c *commands) list(use, short string, named bool) *cobra.Command {
	pf := newPrintFlags()
	var all, watching bool
	var selector string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		RunE: func(cmd *cobra.Command, args []string) error {
			if named && len(args) == 0 {
				return &UsageError{Err: errors.New("get takes one or more NAMEs (rollout list lists them all)")}
			}
			if !named && len(args) > 0 {
				return &UsageError{Err: fmt.Errorf("list takes no arguments, got %q (rollout get NAME shows one)", args)}
			}
			printer, err := pf.printer(c.o.Clock.Now, all)
			if err != nil {
				return &UsageError{Err: err}
			}
			cl, err := c.o.NewClients(c.flags)
			if err != nil {
				return err
			}
			var ri dynamic.ResourceInterface = cl.Dynamic.Resource(v1alpha1.GroupVersionResource())
			if !all {
				ri = cl.Dynamic.Resource(v1alpha1.GroupVersionResource()).Namespace(cl.Namespace)
			}
			ctx := cmd.Context()
			opts := metav1.ListOptions{LabelSelector: selector}
			wanted := func(u *unstructured.Unstructured) bool { return true }
			if named {
				if len(args) == 1 {
					opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", args[0]).String()
				}
				set := map[string]bool{}
				for _, a := range args {
					set[a] = true
				}
				wanted = func(u *unstructured.Unstructured) bool { return set[u.GetName()] }
			}
			list, err := ri.List(ctx, opts)
			if err != nil {
				return fmt.Errorf("list ConfigRollouts: %w", err)
			}
			items := list.Items[:0]
			found := map[string]bool{}
			for _, u := range list.Items {
				if wanted(&u) {
					items = append(items, u)
					found[u.GetName()] = true
				}
			}
			list.Items = items
			var missing error
			for _, a := range args {
				if !found[a] {
					missing = errors.Join(missing, fmt.Errorf("ConfigRollout %s/%s not found", cl.Namespace, a))
				}
			}
			switch {
			case named && len(args) == 1 && len(items) == 1:
				// One object, as kubectl get NAME prints it (not a List).
				if err := printer.PrintObj(&items[0], c.o.Out); err != nil {
					return err
				}
			case len(items) > 0 || !watching:
				if err := printList(printer, list, c); err != nil {
					return err
				}
			}
			if !watching || missing != nil {
				return missing
			}
			return follow(ctx, ri, opts, list.GetResourceVersion(), func(ev watch.Event) (bool, error) {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok || !wanted(u) {
					return false, nil
				}
				return false, printer.PrintObj(u, c.o.Out)
			})
		},
	}
	f := cmd.Flags()
	pf.addFlags(cmd, true)
	f.BoolVarP(&all, "all-namespaces", "A", false, "List the rollouts of every namespace.")
	f.StringVarP(&selector, "selector", "l", "", "Only the rollouts with these labels (a label selector).")
	f.BoolVarP(&watching, "watch", "w", false, "After listing, follow the changes (a watch of the API server).")
	return cmd
}

// printList prints a list: a table prints its rows (and "No resources
// found" for none, as kubectl says it), the other formats print the List.
func printList(p printers.ResourcePrinter, list *unstructured.UnstructuredList, c *commands) error {
	if len(list.Items) == 0 {
		if _, ok := p.(printers.ResourcePrinterFunc); ok {
			_, err := fmt.Fprintln(c.o.ErrOut, "No ConfigRollouts found.")
			return err
		}
	}
	list.SetAPIVersion("v1")
	list.SetKind("List")
	return p.PrintObj(list, c.o.Out)
}

// follow watches ri from resourceVersion rv and calls on for each added,
// changed or deleted object until it says done, ctx ends, or the watch
// fails for good. A watch the server closes is resumed where it stood
// (client-go's RetryWatcher); one whose resourceVersion expired, or that
// had none to resume from, is started again from a fresh list.
func follow(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions, rv string, on func(watch.Event) (bool, error)) error {
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector, o.FieldSelector = opts.LabelSelector, opts.FieldSelector
		return ri.Watch(ctx, o)
	}}
	for ctx.Err() == nil {
		var w watch.Interface
		var err error
		if rv == "" || rv == "0" {
			w, err = ri.Watch(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector})
		} else {
			w, err = watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
		}
		if err != nil {
			return fmt.Errorf("watch ConfigRollouts: %w", err)
		}
		again, err := drain(ctx, w, on)
		w.Stop()
		if !again || err != nil {
			return err
		}
		// Start again from now; objects changed meanwhile come as the next
		// changes.
		list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector, Limit: 1})
		if err != nil {
			return fmt.Errorf("list ConfigRollouts: %w", err)
		}
		rv = list.GetResourceVersion()
	}
	return nil
}

// drain passes w's events to on; again says the watch ended and is to be
// started afresh (its resourceVersion expired, or it closed).
func drain(ctx context.Context, w watch.Interface, on func(watch.Event) (bool, error)) (again bool, err error) {
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return true, nil
			}
			switch ev.Type {
			case watch.Bookmark:
				continue
			case watch.Error:
				st := apierrors.FromObject(ev.Object)
				var se apierrors.APIStatus
				if errors.As(st, &se) && se.Status().Code == http.StatusGone {
					return true, nil
				}
				return false, fmt.Errorf("watch ConfigRollouts: %w", st)
			}
			done, err := on(ev)
			if done || err != nil {
				return false, err
			}
		}
	}
}

// deleteCmd is `rollout delete NAME...`: it deletes them and, with --wait
// (the default, as kubectl's), waits until they are gone: a rollout with
// nodes on its config first puts them back (its finalizer), which needs the
// rollout controller.
func (c *commands) deleteCmd() *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete rollouts; an active one first puts the nodes it changed back",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ri, ns, err := c.rollouts()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			var errs error
			for _, name := range args {
				err := ri.Delete(ctx, name, metav1.DeleteOptions{})
				switch {
				case apierrors.IsNotFound(err):
					errs = errors.Join(errs, fmt.Errorf("ConfigRollout %s/%s not found", ns, name))
					continue
				case err != nil:
					errs = errors.Join(errs, fmt.Errorf("delete ConfigRollout %s/%s: %w", ns, name, err))
					continue
				}
				fmt.Fprintf(c.o.Out, "configrollout.dynconfig.io/%s deleted\n", name)
				if wait {
					if err := waitGone(ctx, ri, ns, name); err != nil {
						errs = errors.Join(errs, err)
					}
				}
			}
			return errs
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "Wait until each rollout is gone (its nodes put back by the rollout controller).")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "How long to wait in all; 0 waits as long as it takes.")
	return cmd
}

// waitGone waits until ns/name no longer exists.
func waitGone(ctx context.Context, ri dynamic.ResourceInterface, ns, name string) error {
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	list, err := ri.List(ctx, opts)
	if err != nil {
		return fmt.Errorf("wait for ConfigRollout %s/%s to go: %w", ns, name, err)
	}
	if len(list.Items) == 0 {
		return nil
	}
	err = follow(ctx, ri, opts, list.GetResourceVersion(), func(ev watch.Event) (bool, error) {
		return ev.Type == watch.Deleted, nil
	})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("wait for ConfigRollout %s/%s to go (its finalizer %s stays until its nodes are put back; is dynconfig-rollout running?): %w",
			ns, name, plan.Finalizer, err)
	}
	return nil
}
