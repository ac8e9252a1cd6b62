package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/dynconfig/dynconfig/merge"
)

// stdinName is the FILE that validate reads from its standard input.
const stdinName = "-"

func newValidateCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check component config files offline, reporting every error of every file",
		Long: `validate decodes, defaults and validates each FILE as the component would:
strict decoding (case-sensitive field names, no unknown or duplicate fields,
one document per file), the component's defaults, then its validation. The
component is chosen by each file's apiVersion and kind:

  ` + strings.ReplaceAll(knownKinds(), ", ", "\n  ") + `

It needs no API server and no state dir. Every error of every file is
reported, one per line on stderr, each naming the file and the field; a file
that passes is listed on stdout. FILE "-" is the standard input.

Exit status: 0 when every file is valid, 1 when any is invalid or cannot be
read, 2 on a usage error.`,
		Example: `  # Check a kubelet config and a kube-proxy config before rolling them out.
  dynconfigctl validate kubelet.yaml kube-proxy.yaml

  # Check the payload of a ConfigMap.
  kubectl get configmap -n kube-system kubelet-v2 -o jsonpath='{.data.kubelet}' | dynconfigctl validate -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("validate takes at least 1 argument, FILE..., got 0")
			}
			stdinUses := 0
			for _, a := range args {
				switch {
				case a == "":
					return usagef("validate: a FILE must not be empty")
				case a == stdinName:
					stdinUses++
				}
			}
			if stdinUses > 1 {
				return usagef("validate: the standard input (-) can be read only once")
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			return runValidate(stdin, stdout, stderr, args)
		},
	}
}

// runValidate validates every file and reports each one: valid files on
// stdout, each error of an invalid one on stderr. The error returned says
// how many files are invalid.
func runValidate(stdin io.Reader, stdout, stderr io.Writer, files []string) error {
	invalid := 0
	for _, file := range files {
		p, err := validateFile(stdin, file)
		if err != nil {
			invalid++
			for _, line := range strings.Split(err.Error(), "\n") {
				if _, werr := fmt.Fprintln(stderr, line); werr != nil {
					return werr
				}
			}
			continue
		}
		if _, err := fmt.Fprintf(stdout, "%s: valid %s (%s)\n", displayName(file), p.gvk.Kind, p.gvk.GroupVersion()); err != nil {
			return err
		}
	}
	if invalid > 0 {
		return fmt.Errorf("%d of %d file(s) invalid", invalid, len(files))
	}
	return nil
}

// displayName is how a FILE is named in messages.
func displayName(file string) string {
	if file == stdinName {
		return "<stdin>"
	}
	return file
}

// validateFile reads, decodes, defaults and validates one file with the
// profile its apiVersion and kind select. Every line of the error starts
// with the file's name.
func validateFile(stdin io.Reader, file string) (profile, error) {
	name := displayName(file)
	var data []byte
	var err error
	if file == stdinName {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = readRegularFile(file)
	}
	if err != nil {
		return profile{}, fmt.Errorf("%s: %w", name, err)
	}
	p, err := profileOf(name, data)
	if err != nil {
		return profile{}, err
	}
	layers := merge.Layers{Base: &merge.Document{Name: name, Data: data}}
	_, err = p.merge(layers, "", merge.Options{})
	if err == nil {
		return p, nil
	}
	// Strict decoding stops before validation. When all it found are
	// unknown or duplicate fields, the document still decodes leniently:
	// validate that too, so that one run reports every error.
	var me *merge.Error
	if errors.As(err, &me) && me.Validation == nil && onlyFieldNameProblems(me) {
		if _, lerr := p.merge(layers, "", merge.Options{Lenient: true}); lerr != nil {
			var lme *merge.Error
			if errors.As(lerr, &lme) && lme.Validation != nil {
				err = errors.Join(err, lme.Validation)
			}
		}
	}
	return profile{}, renameMerged(err, name)
}

// onlyFieldNameProblems reports whether every problem of e is an unknown or
// duplicate field, which lenient decoding skips.
func onlyFieldNameProblems(e *merge.Error) bool {
	if len(e.Policy) > 0 || len(e.Decode) == 0 {
		return false
	}
	for _, d := range e.Decode {
		for _, p := range d.Problems {
			if p.Type != merge.ProblemUnknownField && p.Type != merge.ProblemDuplicateField {
				return false
			}
		}
	}
	return true
}

// readRegularFile reads a config file with merge.ReadFile, the library's
// one reader of config paths: a directory, a FIFO, a device or a file
// larger than merge.MaxDocumentSize is an error that says so, never a hang.
// The error does not name the path: the caller does.
func readRegularFile(path string) ([]byte, error) {
	data, err := merge.ReadFile(path)
	if err != nil {
		return nil, unwrapPathError(err)
	}
	return data, nil
}

// unwrapPathError drops the path of a *fs.PathError, which the caller
// already names.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// profileOf picks the profile by the document's apiVersion and kind, read
// with exact (case-sensitive) keys as the strict decoder reads them.
func profileOf(name string, data []byte) (profile, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return profile{}, fmt.Errorf("%s: the file is empty; want a %s document", name, kindList())
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return profile{}, fmt.Errorf("%s: not a YAML or JSON object: %s", name, strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return profile{}, fmt.Errorf("%s: not a YAML or JSON object: the document is %s", name, describeJSONValue(v))
	}
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if apiVersion == "" || kind == "" {
		var missing []string
		if apiVersion == "" {
			missing = append(missing, "apiVersion")
		}
		if kind == "" {
			missing = append(missing, "kind")
		}
		return profile{}, fmt.Errorf("%s: %s missing; want one of: %s", name, strings.Join(missing, " and "), knownKinds())
	}
	p, ok := profileForKind(apiVersion, kind)
	if !ok {
		return profile{}, fmt.Errorf("%s: unknown apiVersion %q and kind %q; want one of: %s", name, apiVersion, kind, knownKinds())
	}
	return p, nil
}

// kindList names the kinds of profiles ("KubeletConfiguration or
// KubeProxyConfiguration").
func kindList() string {
	var kinds []string
	for _, p := range profiles {
		kinds = append(kinds, p.gvk.Kind)
	}
	return strings.Join(kinds, " or ")
}

// mergedConfigName is what merge calls the result of a merge in its
// validation errors.
const mergedConfigName = "merged config"

// renameMerged names the document instead of "merged config" in the
// validation errors of a merge of one document.
func renameMerged(err error, name string) error {
	var lines []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if rest, ok := strings.CutPrefix(line, mergedConfigName+": "); ok {
			line = name + ": " + strings.TrimSuffix(rest, " (set by "+name+")")
		}
		lines = append(lines, line)
	}
	return errors.New(strings.Join(lines, "\n"))
}

// describeJSONValue names the JSON type of a decoded value, for messages.
func describeJSONValue(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int64:
		return "a number"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("a %T", v)
}
