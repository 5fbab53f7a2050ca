// Command snippets-check checks the image-baker recipes of docs/node-images.md
// that cannot run here (hack/release-check.sh extracts them):
//
//	snippets-check dockerfile FILE   BuildKit's parser reads it without a warning,
//	                                 and every instruction is one BuildKit knows
//	snippets-check packer FILE       HCL native syntax; a build block with a
//	                                 "file" and a "shell" provisioner
//
// It has its own module (go.mod here), so BuildKit and HCL never enter the
// project's go.mod.
package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: snippets-check dockerfile|packer FILE")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "dockerfile":
		err = dockerfile(os.Args[2])
	case "packer":
		err = packer(os.Args[2])
	default:
		err = fmt.Errorf("unknown kind %q (want dockerfile or packer)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "snippets-check:", err)
		os.Exit(1)
	}
}

func dockerfile(file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	res, err := parser.Parse(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, w := range res.Warnings {
		return fmt.Errorf("%s: line %d: %s", file, w.Location.Start.Line, w.Short)
	}
	stages, _, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if len(stages) == 0 {
		return fmt.Errorf("%s: no FROM", file)
	}
	for _, s := range stages {
		fmt.Printf("FROM %s: %d instructions\n", s.BaseName, len(s.Commands))
	}
	return nil
}

func packer(file string) error {
	f, diags := hclparse.NewParser().ParseHCLFile(file)
	if diags.HasErrors() {
		return diags
	}
	body := f.Body.(*hclsyntax.Body)
	provisioners := map[string]bool{}
	for _, b := range body.Blocks {
		if b.Type != "build" {
			continue
		}
		for _, p := range b.Body.Blocks {
			if p.Type == "provisioner" && len(p.Labels) == 1 {
				provisioners[p.Labels[0]] = true
			}
		}
	}
	if !provisioners["file"] || !provisioners["shell"] {
		return fmt.Errorf("%s: want a build block with a \"file\" and a \"shell\" provisioner, have %v", file, provisioners)
	}
	fmt.Printf("build: provisioners %v\n", provisioners)
	return nil
}
