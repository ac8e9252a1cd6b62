package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"

	"github.com/dynconfig/dynconfig/nodeapi"
	"github.com/dynconfig/dynconfig/rollout/api/v1alpha1"
)

// printFlags is kubectl's -o for ConfigRollouts: json, yaml, name,
// jsonpath=..., go-template=... (cli-runtime's printers), and here the
// table ("" and wide) and custom-columns=NAME:.path,...
type printFlags struct {
	cli *genericclioptions.PrintFlags
	// noHeaders is --no-headers of the tables.
	noHeaders bool
}

func newPrintFlags() *printFlags {
	return &printFlags{cli: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme())}
}

// scheme knows the ConfigRollout types, so that a printer can set their
// apiVersion and kind.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	return s
}

func (p *printFlags) addFlags(cmd *cobra.Command, table bool) {
	p.cli.AddFlags(cmd)
	formats := p.cli.AllowedFormats()
	if table {
		formats = append(formats, "wide", "custom-columns")
		cmd.Flags().BoolVar(&p.noHeaders, "no-headers", false, "When printing a table (the default, wide or custom-columns), leave the headers out.")
	}
	cmd.Flags().Lookup("output").Usage = fmt.Sprintf("Output format. One of: (%s).", strings.Join(formats, ", "))
}

// format is the -o value.
func (p *printFlags) format() string { return *p.cli.OutputFormat }

// printer returns the printer -o asks for. The table's ages and staleness
// are measured at now(); withNamespace adds the NAMESPACE column.
func (p *printFlags) printer(now func() time.Time, withNamespace bool) (printers.ResourcePrinter, error) {
	switch f := p.format(); {
	case f == "" || f == "wide":
		table := printers.NewTablePrinter(printers.PrintOptions{Wide: f == "wide", WithNamespace: withNamespace, NoHeaders: p.noHeaders})
		return printers.ResourcePrinterFunc(func(obj runtime.Object, w io.Writer) error {
			t, err := rolloutTable(obj, now())
			if err != nil {
				return err
			}
			return table.PrintObj(t, w)
		}), nil
	case strings.HasPrefix(f, "custom-columns="):
		return customColumns(strings.TrimPrefix(f, "custom-columns="), p.noHeaders)
	case f == "custom-columns":
		return nil, errors.New("-o custom-columns: want custom-columns=NAME:.jsonpath[,NAME:.jsonpath...]")
	}
	pr, err := p.cli.ToPrinter()
	if err != nil {
		return nil, fmt.Errorf("-o %s: %w (or wide, custom-columns=...)", p.format(), err)
	}
	return pr, nil
}

// columns are the table's columns: what `kubectl get configrollouts` shows
// (the CRD's additionalPrinterColumns) with the step counted from 1 and a
// stale rollout's message saying so first; Priority 1 is -o wide's.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name"},
	{Name: "Phase", Type: "string"},
	{Name: "Step", Type: "string", Description: "The step in progress, counted from 1, of the spec's steps."},
	{Name: "ConfigMap", Type: "string", Priority: 1},
	{Name: "Component", Type: "string", Priority: 1},
	{Name: "Selected", Type: "integer", Priority: 1},
	{Name: "Assigned", Type: "integer"},
	{Name: "In Trial", Type: "integer"},
	{Name: "Promoted", Type: "integer"},
	{Name: "Failed", Type: "integer"},
	{Name: "Reconciled", Type: "string", Priority: 1, Description: "How long ago the rollout controller last reconciled it."},
	{Name: "Age", Type: "string"},
	{Name: "Message", Type: "string"},
}

// rolloutItems returns the objects of obj, a ConfigRollout or a list of
// them (unstructured, as the dynamic client returns them); how says how
// they were to be printed, for the error about anything else.
func rolloutItems(obj runtime.Object, how string) ([]unstructured.Unstructured, error) {
	switch o := obj.(type) {
	case *unstructured.UnstructuredList:
		return o.Items, nil
	case *unstructured.Unstructured:
		return []unstructured.Unstructured{*o}, nil
	}
	return nil, fmt.Errorf("cannot print %T %s", obj, how)
}

// rolloutTable turns a ConfigRollout or a list of them (unstructured, as
// the dynamic client returns them) into a table.
func rolloutTable(obj runtime.Object, now time.Time) (*metav1.Table, error) {
	items, err := rolloutItems(obj, "as a ConfigRollout table")
	if err != nil {
		return nil, err
	}
	t := &metav1.Table{ColumnDefinitions: columns}
	for i := range items {
		u := &items[i]
		var ro v1alpha1.ConfigRollout
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ro); err != nil {
			return nil, fmt.Errorf("decode ConfigRollout %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: row(&ro, now), Object: runtime.RawExtension{Object: u}})
	}
	return t, nil
}

func row(ro *v1alpha1.ConfigRollout, now time.Time) []any {
	st := &ro.Status
	phase := string(st.Phase)
	if phase == "" {
		phase = "<unseen>"
	}
	msg := st.Message
	if s := Stale(ro, now); s != "" {
		msg = "STALE: " + s
	}
	return []any{
		ro.Name, phase, stepColumn(ro), ro.Spec.ConfigMapName, nodeapi.ComponentOrDefault(ro.Spec.Component),
		int64(st.Selected), int64(st.Assigned), int64(st.InTrial), int64(st.Promoted), int64(st.Failed),
		lastSeen(ro, now), duration.HumanDuration(now.Sub(ro.CreationTimestamp.Time)), msg,
	}
}

// stepColumn is "2/3" for index 1 of 3 steps, "3/3" once all are done,
// "-" before the controller has seen the rollout.
func stepColumn(ro *v1alpha1.ConfigRollout) string {
	n := len(ro.Spec.Steps)
	if ro.Status.Phase == "" {
		return "-"
	}
	i := min(max(int(ro.Status.CurrentStep)+1, 1), n)
	return fmt.Sprintf("%d/%d", i, n)
}

// customColumns is kubectl's -o custom-columns=NAME:.jsonpath,...: one
// column per spec, each cell the path's value ("<none>" when absent).
func customColumns(spec string, noHeaders bool) (printers.ResourcePrinter, error) {
	if spec == "" {
		return nil, errors.New("-o custom-columns=: no columns")
	}
	type column struct {
		name string
		path *jsonpath.JSONPath
	}
	var cols []column
	for _, part := range strings.Split(spec, ",") {
		name, path, ok := strings.Cut(part, ":")
		if !ok || name == "" || path == "" {
			return nil, fmt.Errorf("-o custom-columns: %q: want NAME:.jsonpath", part)
		}
		if !strings.HasPrefix(path, "{") {
			path = "{" + strings.TrimPrefix(path, "{") + "}"
		}
		jp := jsonpath.New(name).AllowMissingKeys(true)
		if err := jp.Parse(path); err != nil {
			return nil, fmt.Errorf("-o custom-columns: column %s: %w", name, err)
		}
		cols = append(cols, column{name, jp})
	}
	printedHeader := false
	return printers.ResourcePrinterFunc(func(obj runtime.Object, out io.Writer) error {
		items, err := rolloutItems(obj, "with custom-columns")
		if err != nil {
			return err
		}
		w := printers.GetNewTabWriter(out)
		if !noHeaders && !printedHeader {
			names := make([]string, len(cols))
			for i, c := range cols {
				names[i] = c.name
			}
			fmt.Fprintln(w, strings.Join(names, "\t"))
			printedHeader = true
		}
		for _, u := range items {
			cells := make([]string, len(cols))
			for i, c := range cols {
				vals, err := c.path.FindResults(u.Object)
				if err != nil {
					return fmt.Errorf("-o custom-columns: column %s: %w", c.name, err)
				}
				var parts []string
				for _, v := range vals {
					for _, x := range v {
						parts = append(parts, fmt.Sprint(x.Interface()))
					}
				}
				cells[i] = "<none>"
				if len(parts) > 0 {
					cells[i] = strings.Join(parts, ",")
				}
			}
			fmt.Fprintln(w, strings.Join(cells, "\t"))
		}
		return w.Flush()
	}), nil
}
