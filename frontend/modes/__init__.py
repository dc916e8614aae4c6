"""flow.modes"""
