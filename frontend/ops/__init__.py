"""flow.ops"""
