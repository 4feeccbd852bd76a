package config

import "strings"

// DeviceNames are the devices a target may name under this configuration: the built-in desktop
// and mobile, every device of render.devices, and every device of render.user_agents. It is the
// one answer to "is this a device?": every way a device enters (targets, uploads, sitemaps,
// discovery, rush and wait, explain, pages, delete) asks it of the configuration in force, so a
// device added under render.devices can be submitted, and a reload that drops one refuses it.
func (r *Render) DeviceNames() map[string]bool {
	names := make(map[string]bool, 2+len(r.Devices)+len(r.UserAgents))
	for name := range BuiltinDevices() {
		names[name] = true
	}
	for name := range r.Devices {
		names[name] = true
	}
	for name := range r.UserAgents {
		names[name] = true
	}
	return names
}

// Emulation is how the chrome renderer presents device name: render.devices.<name>, else the
// built-in device of that name, else desktop's viewport. Its user agent is the device's own,
// else render.user_agents.<name>, else the built-in device's, else render.user_agent. Its
// scale is never 0 (1).
func (r *Render) Emulation(name string) Device {
	if name == "" {
		name = DefaultDevice
	}
	d, ok := r.Devices[name]
	if !ok {
		builtin := BuiltinDevices()
		if d, ok = builtin[name]; !ok {
			d = builtin[DefaultDevice]
		}
		if ua := r.UserAgents[name]; ua != "" {
			d.UserAgent = ua
		}
	}
	if d.UserAgent == "" {
		d.UserAgent = r.UserAgents[name]
	}
	if d.UserAgent == "" {
		d.UserAgent = r.UserAgent
	}
	if d.Scale == 0 {
		d.Scale = 1
	}
	d.UserAgent = r.Marked(d.UserAgent)
	return d
}

// Marked is ua as a render sends it: ending with render.user_agent_suffix, unless ua carries
// the suffix already (the built-in agents carry freshq's own), so that a site can tell a render
// from a visitor whatever agent a device is given.
func (r *Render) Marked(ua string) string {
	if r.UserAgentSuffix == "" || strings.Contains(ua, r.UserAgentSuffix) {
		return ua
	}
	return ua + " " + r.UserAgentSuffix
}
