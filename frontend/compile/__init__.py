"""flow.compile"""
