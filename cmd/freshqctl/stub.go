package main

func runSitemap(a *app, args []string) error    { return usagef("not yet") }
func runPrioritize(a *app, args []string) error { return usagef("not yet") }
func runTop(a *app, args []string) error        { return usagef("not yet") }
