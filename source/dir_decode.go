package source

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	yamlv2 "go.yaml.in/yaml/v2"
	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decodeStrict decodes data, one YAML or JSON document, into out as
// strictly as the config itself is decoded: field names are
// case-sensitive, and unknown fields, duplicate fields and a second
// (non-empty) document are errors. An unknown field is named by its path
// ("configMap.Uid"). Several problems are joined with "; ", so the message
// stays on one line.
func decodeStrict(data []byte, out any) error {
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return yamlError(err)
	}
	if err := singleDocument(data); err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(js, out)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// singleDocument returns an error when data holds a YAML document after
// the first one that is not empty (a trailing "---" is fine). sigs.k8s.io/yaml
// reads the first document only and would drop the rest without a word.
func singleDocument(data []byte) error {
	// Only "---" or "..." can start another document.
	if !bytes.Contains(data, []byte("---")) && !bytes.Contains(data, []byte("...")) {
		return nil
	}
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	for n := 0; ; n++ {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return yamlError(err)
		}
		if n > 0 && doc != nil {
			return errors.New("more than one YAML document")
		}
	}
}

// yamlError renders a YAML error on one line: the duplicate keys a strict
// decode reports come as a multi-line list.
func yamlError(err error) error {
	var te *yamlv2.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return errors.New("yaml: " + strings.Join(te.Errors, "; "))
	}
	return err
}

// decodeDirAssignment decodes the content of an assignment file: a
// NodeConfigSource in YAML or JSON, strictly. Empty (or only white space)
// and "null" are the empty assignment (nil). It does not validate.
func decodeDirAssignment(data []byte) (*corev1.NodeConfigSource, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	var src corev1.NodeConfigSource
	if err := decodeStrict(data, &src); err != nil {
		return nil, err
	}
	return &src, nil
}

// decodeDirConfigMap decodes the content of a ConfigMap file strictly and
// checks that it is one ConfigMap that names itself in full (namespace,
// name and uid). The result has its kind and apiVersion set, and, when the
// file gives none, a resourceVersion derived from the content (so an edit
// is a new version, as on an API server).
func decodeDirConfigMap(data []byte) (*corev1.ConfigMap, error) {
	var cm *corev1.ConfigMap
	if err := decodeStrict(data, &cm); err != nil {
		return nil, err
	}
	if cm == nil {
		return nil, errors.New("the file is empty")
	}
	if cm.Kind != "" && cm.Kind != "ConfigMap" {
		return nil, fmt.Errorf("kind is %q, want ConfigMap", cm.Kind)
	}
	if cm.APIVersion != "" && cm.APIVersion != "v1" {
		return nil, fmt.Errorf("apiVersion is %q, want v1", cm.APIVersion)
	}
	var missing []string
	if cm.Namespace == "" {
		missing = append(missing, "metadata.namespace")
	}
	if cm.Name == "" {
		missing = append(missing, "metadata.name")
	}
	if cm.UID == "" {
		missing = append(missing, "metadata.uid")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("all of metadata.namespace, metadata.name and metadata.uid must be non-empty, missing: %s",
			strings.Join(missing, ", "))
	}
	if cm.ResourceVersion == "" {
		sum := sha256.Sum256(data)
		cm.ResourceVersion = hex.EncodeToString(sum[:6])
	}
	cm.Kind, cm.APIVersion = "ConfigMap", "v1"
	return cm, nil
}
