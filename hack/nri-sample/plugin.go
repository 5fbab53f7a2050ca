/*
   Copyright The containerd Authors.

   Licensed under the Apache License, Version 2.0 (the "License");
   you may not use this file except in compliance with the License.
   You may obtain a copy of the License at

       http://www.apache.org/licenses/LICENSE-2.0

   Unless required by applicable law or agreed to in writing, software
   distributed under the License is distributed on an "AS IS" BASIS,
   WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
   See the License for the specific language governing permissions and
   limitations under the License.
*/

// Command nri-sample is NRI's template plugin (github.com/containerd/nri,
// plugins/template, at commit 8ec8b28) made into "another vendor's plugin
// that also adjusts namespaces", for cri-nstarget's integration tests: for a
// container whose CRI annotations carry nri-sample.cri-nstarget.test/pid-namespace,
// it sets the container's pid namespace to that path. The template's
// YAML configuration and its logging of every event are left out.
package main

import (
	"context"
	"flag"
	"os"

	"github.com/sirupsen/logrus"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// pidAnnotation names the pid namespace path this plugin puts a container in.
const pidAnnotation = "nri-sample.cri-nstarget.test/pid-namespace"

type plugin struct {
	stub stub.Stub
}

var log *logrus.Logger

func (p *plugin) CreateContainer(_ context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adjustment := &api.ContainerAdjustment{}
	if path, ok := ctr.GetAnnotations()[pidAnnotation]; ok {
		log.Infof("Setting pid namespace of %s/%s/%s to %s", pod.GetNamespace(), pod.GetName(), ctr.GetName(), path)
		adjustment.AddOrReplaceNamespace(&api.LinuxNamespace{Type: "pid", Path: path})
	}
	return adjustment, nil, nil
}

func main() {
	var (
		pluginName string
		pluginIdx  string
		socketPath string
		err        error
	)

	log = logrus.StandardLogger()
	log.SetFormatter(&logrus.TextFormatter{
		PadLevelText: true,
	})

	flag.StringVar(&pluginName, "name", "", "plugin name to register to NRI")
	flag.StringVar(&pluginIdx, "idx", "", "plugin index to register to NRI")
	flag.StringVar(&socketPath, "socket", "", "NRI socket to connect to")
	flag.Parse()

	opts := []stub.Option{
		stub.WithOnClose(func() { os.Exit(0) }),
	}
	if pluginName != "" {
		opts = append(opts, stub.WithPluginName(pluginName))
	}
	if pluginIdx != "" {
		opts = append(opts, stub.WithPluginIdx(pluginIdx))
	}
	if socketPath != "" {
		opts = append(opts, stub.WithSocketPath(socketPath))
	}

	p := &plugin{}
	if p.stub, err = stub.New(p, opts...); err != nil {
		log.Fatalf("failed to create plugin stub: %v", err)
	}

	err = p.stub.Run(context.Background())
	if err != nil {
		log.Errorf("plugin exited with error %v", err)
		os.Exit(1)
	}
}
